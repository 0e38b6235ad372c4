"""The example values of `luma record template`: one valid record per kind a file may hold, made
up for illustration (never a measurement). `luma.kb.records.template` walks the kind's pydantic
model over these values and writes the comments; tests/kb/records/test_template.py validates and
ingests every one, so a model change that breaks an example fails there, not in a user's hands.

The PEX examples are built from a few figures so their trials agree with their verdicts: every
percentile clause has its bounds and samples, as ingest re-judges them.
"""

from __future__ import annotations

import copy

WORKLOAD = {"name": "chat-assistant", "model": "llama-3.1-8b-instruct", "task": "generation"}
ARCHITECTURE = {"name": "AMD EPYC 9654 (Zen 4)", "kind": "cpu", "vendor": "AMD"}
CONTRACT = {"name": "chat-ttft", "concurrency": 4, "clauses": [
    {"metric": "p95_ttft", "op": "<=", "value": 500, "unit": "ms"},
    {"metric": "quality", "op": ">=", "value": 0.95, "unit": "dimensionless"},
]}
PASS_STATE = {"dimensions": {"compute": {"value": 8, "unit": "core"}, "host_memory": {"value": 16, "unit": "GiB"}}}
FAIL_STATE = {"dimensions": {"compute": {"value": 4, "unit": "core"}, "host_memory": {"value": 16, "unit": "GiB"}}}
PROVENANCE = {"tool": "hand-written from `luma record template`", "host": "lab-1",
              "started": "2026-12-05T09:00:00+00:00"}


def observations(p95_ms: float, low_ms: float, high_ms: float, samples: int, quality: float) -> list[dict]:
    """What a trial of CONTRACT observes: the p95 TTFT with its 95 % bounds and sample count, and
    the quality score."""
    return [
        {"metric": "p95_ttft", "value": p95_ms, "unit": "ms"},
        {"metric": "p95_ttft.ci_low", "value": low_ms, "unit": "ms"},
        {"metric": "p95_ttft.ci_high", "value": high_ms, "unit": "ms"},
        {"metric": "p95_ttft.samples", "value": samples, "unit": "request"},
        {"metric": "quality", "value": quality, "unit": "dimensionless"},
    ]


#: (state, verdict, failure cause, observations) of the chain's trials, repetition by repetition.
TRIALS = (
    ("pass", "PASS", None, observations(410, 380, 450, 120, 0.97)),
    ("pass", "PASS", None, observations(425, 390, 470, 120, 0.97)),
    ("fail", "FAIL", "slo-miss", observations(640, 590, 720, 120, 0.97)),
    ("recovered", "PASS", None, observations(440, 400, 485, 120, 0.96)),
    ("recovered", "PASS", None, observations(455, 410, 490, 120, 0.96)),
)


def pex_chain() -> dict:
    """A measured chain of five embedded trials: compute 8 -> 4 cores crosses the TTFT clause,
    int8 weights recover it."""
    seen: dict[str, int] = {}
    trials = []
    for state, verdict, cause, obs in TRIALS:
        seen[state] = seen.get(state, 0) + 1
        trial = {"state": state, "repetition": seen[state], "verdict": verdict, "observations": obs}
        if cause:
            trial["failure_cause"] = cause
        trials.append(trial)
    return {"record_type": "pex-chain", "evidence_class": "measured", "workload": WORKLOAD,
            "architecture": ARCHITECTURE, "contract": CONTRACT, "pass_state": PASS_STATE, "fail_state": FAIL_STATE,
            "crossed_dimension": "compute", "binding_resource": "compute",
            "intervention": {"name": "int8-weights", "kind": "software"}, "recovered": True, "repetitions": 2,
            "trials": trials, "provenance": PROVENANCE}


def pex_trial() -> dict:
    """One measured trial at the chain's pass state."""
    _, verdict, _, obs = TRIALS[0]
    return {"record_type": "pex-trial", "evidence_class": "measured", "sprint": "hand-written-20261205",
            "sequence": 0, "phase": "boundary", "workload": WORKLOAD, "architecture": ARCHITECTURE,
            "contract": CONTRACT, "state": PASS_STATE, "variant": "fp32", "verdict": verdict, "attempts": 1,
            "observations": obs, "provenance": PROVENANCE}


#: A machine record (from the project's own fixtures and catalogue).
MACHINE = {'record_type': 'machine',
 'evidence_class': 'vendor-claim',
 'name': 'amd-epyc-9654',
 'architecture': {'name': 'AMD EPYC 9654 (Genoa)', 'kind': 'cpu', 'vendor': 'AMD'},
 'count': 1,
 'source': {'title': 'AMD EPYC 9654 processor specifications',
            'url': 'https://www.amd.com/en/products/processors/server/epyc/4th-generation-9004-and-8004-series/amd-epyc-9654.html'},
 'memory': [{'tier': 'host', 'capacity': {'value': 6, 'unit': 'TB'}, 'bandwidth': {'value': 460.8, 'unit': 'GB/s'}}],
 'power': {'tdp': {'value': 360, 'unit': 'W'}},
 'notes': ['One socket: 96 cores, 192 threads, 2.4 GHz base, 3.7 GHz max boost, 384 MB L3, AVX-512.',
           'The memory capacity is the maximum the socket supports, not an installed amount. The bandwidth is the '
           'stated per-socket memory bandwidth (12 channels of DDR5-4800). The TDP is the default (configurable '
           '320-400 W).',
           'The page states no peak compute throughput, so none is given here.',
           "Transcribed from the vendor's public spec sheet; not reproduced on this machine."],
 'provenance': {'tool': 'luma machine catalog'}}

#: A kernel-result record (from the project's own fixtures and catalogue).
KERNEL_RESULT = {'record_type': 'kernel-result',
 'evidence_class': 'vendor-claim',
 'environment': {'cpu_model': 'AMD EPYC',
                 'isa': ['avx2', 'fma'],
                 'logical_cpus': 2,
                 'usable_cpus': 2,
                 'machine': 'x86_64',
                 'python': '3.11.7',
                 'numpy': '2.4.6',
                 'torch': '2.13.0+cpu',
                 'torch_cpu_capability': 'AVX2',
                 'torch_threads': 1},
 'workload': {'name': 'digits-mlp', 'model': 'digits-mlp', 'task': 'classification'},
 'method': {'name': 'int8-dynamic',
            'kind': 'software',
            'bits': 8,
            'granularity': 'per-channel',
            'mode': 'dynamic',
            'backend': 'onednn'},
 'metrics': [{'metric': 'accuracy', 'value': 0.9689, 'unit': 'dimensionless'},
             {'metric': 'weight_bytes', 'value': 52008, 'unit': 'B'}],
 'repetitions': 1,
 'warmup': 0,
 'artifact': 'luma kernels evaluate --model digits --bits 8',
 'git_revision': '2e16739',
 'limitations': ['one seed; the 450 held-out digits resolve 0.22 percentage points']}

#: A optimize-result record (from the project's own fixtures and catalogue).
OPTIMIZE_RESULT = {'record_type': 'optimize-result',
 'evidence_class': 'measured',
 'sprint': 'matvec-memory-optimize-20261203T120000Z',
 'workload': {'name': 'matvec-4096x256', 'model': 'dense-4096x256', 'task': 'matvec'},
 'architecture': {'name': 'AMD EPYC 9B14', 'kind': 'cpu', 'vendor': 'AMD'},
 'contract': {'name': 'matvec-memory',
              'clauses': [{'metric': 'quality', 'op': '>=', 'value': 0.999, 'unit': 'dimensionless'},
                          {'metric': 'p95_latency', 'op': '<=', 'value': 50, 'unit': 'ms'}]},
 'load': {'mode': 'closed', 'concurrency': 4},
 'state': {'dimensions': {'compute': {'value': 1, 'unit': 'core'}}},
 'configurations': [{'software': {'service': 'matvec',
                                  'variant': 'fp32',
                                  'settings': {'max_batch': 1},
                                  'libraries': {'numpy': '2.1.0', 'python': '3.11.9'}},
                     'concurrency': 4,
                     'trials': [{'verdict': 'PASS',
                                 'observations': [{'metric': 'throughput', 'value': 3000.0, 'unit': '1/s'},
                                                  {'metric': 'quality', 'value': 1.0, 'unit': 'dimensionless'},
                                                  {'metric': 'p95_latency', 'value': 0.002, 'unit': 's'},
                                                  {'metric': 'p95_latency.ci_low', 'value': 0.0015, 'unit': 's'},
                                                  {'metric': 'p95_latency.ci_high', 'value': 0.003, 'unit': 's'},
                                                  {'metric': 'p95_latency.samples', 'value': 80, 'unit': 'request'}]},
                                {'verdict': 'PASS',
                                 'observations': [{'metric': 'throughput', 'value': 2800.0, 'unit': '1/s'},
                                                  {'metric': 'quality', 'value': 1.0, 'unit': 'dimensionless'},
                                                  {'metric': 'p95_latency', 'value': 0.002, 'unit': 's'},
                                                  {'metric': 'p95_latency.ci_low', 'value': 0.0015, 'unit': 's'},
                                                  {'metric': 'p95_latency.ci_high', 'value': 0.003, 'unit': 's'},
                                                  {'metric': 'p95_latency.samples',
                                                   'value': 80,
                                                   'unit': 'request'}]}]},
                    {'software': {'service': 'matvec',
                                  'variant': 'int8-weights',
                                  'settings': {'max_batch': 4},
                                  'artifact': '0000000000000000000000000000000000000000000000000000000000000001',
                                  'libraries': {'numpy': '2.1.0', 'python': '3.11.9'}},
                     'concurrency': 4,
                     'trials': [{'verdict': 'PASS',
                                 'observations': [{'metric': 'throughput', 'value': 2000.0, 'unit': '1/s'},
                                                  {'metric': 'quality', 'value': 0.9995, 'unit': 'dimensionless'},
                                                  {'metric': 'p95_latency', 'value': 0.004, 'unit': 's'},
                                                  {'metric': 'p95_latency.ci_low', 'value': 0.003, 'unit': 's'},
                                                  {'metric': 'p95_latency.ci_high', 'value': 0.005, 'unit': 's'},
                                                  {'metric': 'p95_latency.samples', 'value': 80, 'unit': 'request'}]},
                                {'verdict': 'FAIL',
                                 'failure_cause': 'quality-miss',
                                 'observations': [{'metric': 'throughput', 'value': 2100.0, 'unit': '1/s'},
                                                  {'metric': 'quality', 'value': 0.99, 'unit': 'dimensionless'},
                                                  {'metric': 'p95_latency', 'value': 0.004, 'unit': 's'},
                                                  {'metric': 'p95_latency.ci_low', 'value': 0.003, 'unit': 's'},
                                                  {'metric': 'p95_latency.ci_high', 'value': 0.005, 'unit': 's'},
                                                  {'metric': 'p95_latency.samples',
                                                   'value': 80,
                                                   'unit': 'request'}]}]}],
 'best': {'service': 'matvec',
          'variant': 'fp32',
          'settings': {'max_batch': 1},
          'libraries': {'numpy': '2.1.0', 'python': '3.11.9'}},
 'throughput': {'value': 2800.0, 'unit': '1/s'},
 'provenance': {'tool': 'luma sprint',
                'host': 'lab-1',
                'started': '2026-12-03T12:00:00+00:00',
                'environment': {'cpu_model': 'AMD EPYC 9B14', 'isa': ['avx512f'], 'logical_cpus': 2}}}

#: A pilot-decision record (from the project's own fixtures and catalogue).
PILOT_DECISION = {'record_type': 'pilot-decision',
 'evidence_class': 'measured',
 'pilot': 'pilot-20261204T051200-3f2a',
 'sequence': 0,
 'window': {'start_s': 30.0, 'end_s': 40.0},
 'action': 'downscale',
 'workload': {'name': 'minilm-embedding', 'model': 'all-MiniLM-L6-v2', 'task': 'embedding'},
 'architecture': {'name': 'AMD EPYC 9B14', 'kind': 'cpu', 'vendor': 'AMD'},
 'contract': {'name': 'minilm-embedding-pilot',
              'clauses': [{'metric': 'p95_latency', 'op': '<=', 'value': 250, 'unit': 'ms'},
                          {'metric': 'cost_per_accepted', 'op': '<=', 'value': 2e-06, 'unit': 'USD/request'}]},
 'from_state': {'key': 'd38eedfc185f',
                'state': {'dimensions': {'compute': {'value': 2, 'unit': 'core'},
                                         'host_memory': {'value': 512, 'unit': 'MiB'}}},
                'variant': 'fp32',
                'settings': {'max_batch': 8, 'threads': 2}},
 'candidate': {'key': 'b93515b3d5a0',
               'state': {'dimensions': {'compute': {'value': 1, 'unit': 'core'},
                                        'host_memory': {'value': 256, 'unit': 'MiB'}}},
               'variant': 'int8-weights',
               'settings': {'max_batch': 8, 'threads': 1}},
 'observed': [{'metric': 'rate', 'value': 5.1, 'unit': '1/s', 'evidence_class': 'measured'},
              {'metric': 'p95_latency',
               'value': 0.101,
               'unit': 's',
               'evidence_class': 'measured',
               'ci_low': 0.09,
               'ci_high': 0.12},
              {'metric': 'error_rate', 'value': 0.0, 'unit': 'dimensionless', 'evidence_class': 'measured'},
              {'metric': 'cost_per_accepted',
               'value': 5e-06,
               'unit': 'USD/request',
               'evidence_class': 'projected',
               'source': 'measured serving time x example price table (user-supplied)'},
              {'metric': 'energy_per_accepted', 'value': 1.4, 'unit': 'J/request', 'evidence_class': 'simulated'}],
 'prediction': {'verdict': 'PASS',
                'margin': 0.25,
                'figures': [{'metric': 'p95_latency', 'value': 0.12, 'unit': 's', 'evidence_class': 'measured'},
                            {'metric': 'capacity', 'value': 41.2, 'unit': '1/s', 'evidence_class': 'measured'},
                            {'metric': 'cost_per_accepted',
                             'value': 2.7e-06,
                             'unit': 'USD/request',
                             'evidence_class': 'projected'},
                            {'metric': 'energy_per_accepted',
                             'value': 0.9,
                             'unit': 'J/request',
                             'evidence_class': 'simulated'}]},
 'verification': {'verdict': 'PASS',
                  'windows': 1,
                  'trials': [{'verdict': 'PASS',
                              'observations': [{'metric': 'completed_requests', 'value': 400, 'unit': 'request'},
                                               {'metric': 'rate', 'value': 40.0, 'unit': '1/s'},
                                               {'metric': 'p95_latency', 'value': 0.118, 'unit': 's'},
                                               {'metric': 'p95_latency.ci_low', 'value': 0.1062, 'unit': 's'},
                                               {'metric': 'p95_latency.ci_high', 'value': 0.1298, 'unit': 's'},
                                               {'metric': 'error_rate', 'value': 0.0, 'unit': 'dimensionless'}]}]},
 'realized': {'before': [{'metric': 'cost_per_accepted',
                          'value': 5e-06,
                          'unit': 'USD/request',
                          'evidence_class': 'projected',
                          'ci_low': 4.8e-06,
                          'ci_high': 5.3e-06},
                         {'metric': 'energy_per_accepted',
                          'value': 1.4,
                          'unit': 'J/request',
                          'evidence_class': 'simulated',
                          'ci_low': 1.3,
                          'ci_high': 1.5}],
              'after': [{'metric': 'cost_per_accepted',
                         'value': 2.8e-06,
                         'unit': 'USD/request',
                         'evidence_class': 'projected',
                         'ci_low': 2.6e-06,
                         'ci_high': 3e-06},
                        {'metric': 'energy_per_accepted',
                         'value': 0.95,
                         'unit': 'J/request',
                         'evidence_class': 'simulated',
                         'ci_low': 0.9,
                         'ci_high': 1.0}]},
 'outcome': 'retained',
 'reason': 'predicted saving 46 % at 5.1/s (margin 25 %)',
 'provenance': {'tool': 'luma pilot', 'host': 'lab-1', 'started': '2026-12-04T05:12:00+00:00'}}

#: A intervention-parameters record (from the project's own fixtures and catalogue).
INTERVENTION_PARAMETERS = {'record_type': 'intervention-parameters',
 'partner': 'kvzip-labs',
 'name': 'kvzip',
 'version': '1.2.0',
 'evidence_class': 'vendor-claim',
 'kind': 'partner',
 'description': 'Lossless block codec for the KV cache of decoder models, applied by the serving runtime.',
 'integration_point': 'runtime',
 'data_classes': ['kv-cache'],
 'formats': ['bf16', 'fp16', 'fp8-e4m3'],
 'access_patterns': ['append-only', 'streaming'],
 'limitations': ['Ratios measured by the partner on Llama-class models at 8k context; shorter contexts compress '
                 'less.',
                 'Decode throughput is per GPU with the codec kernels resident; it falls when other kernels '
                 'contend.'],
 'licensing': 'Evaluation licence: 90 days, no redistribution of the codec binaries.',
 'evaluation_boundary': "Figures may be shown to the partner and the owner; never published without the partner's "
                        'consent.',
 'effects': [{'data_class': 'kv-cache',
              'compression_ratio': {'value': 2.0, 'unit': '1'},
              'capacity_effect': {'value': 1.9, 'unit': '1'},
              'bandwidth_effect': {'value': 1.6, 'unit': '1'},
              'conditions': '8k-token context, bf16 KV, block size 16'}],
 'encode_throughput': {'value': 400, 'unit': 'GB/s'},
 'decode_throughput': {'value': 900, 'unit': 'GB/s'},
 'added_latency': {'value': 35, 'unit': 'us'},
 'power': {'value': 18, 'unit': 'W'},
 'buffering': {'value': 64, 'unit': 'MiB'},
 'metadata_overhead': {'value': 1.5, 'unit': 'percent'},
 'memory_management_overhead': {'value': 0.02, 'unit': '1'},
 'coherence': {'software_transparent': False,
               'requires_code_changes': True,
               'constraints': ['The runtime must call the codec on block eviction and before attention reads a '
                               'block.']},
 'source': {'title': 'KVZip 1.2 evaluation brief (illustrative)',
            'url': 'https://example.com/kvzip-1.2-brief.pdf',
            'retrieved': '2026-11-30'},
 'provenance': {'tool': 'partner submission (illustrative example)'}}

#: A model-prediction record (from the project's own fixtures and catalogue).
MODEL_PREDICTION = {'command': 'luma model predict',
 'contract': {'clauses': [{'metric': 'quality', 'op': '>=', 'unit': 'dimensionless', 'value': 0.999},
                          {'metric': 'p95_latency', 'op': '<=', 'unit': 'ms', 'value': 50}],
              'name': 'matvec-memory'},
 'evidence_class': 'simulated',
 'model': {'calibrated': False,
           'code': 'f50ac13252b41a53bf77bd7f3cbc9c3b09b7d65e1e7a41589aeee6d255e64c37',
           'name': 'luma analytical model'},
 'notes': ['uncalibrated: default efficiency figures (run `luma model calibrate`)'],
 'predictions': [{'at_contract_load': True,
                  'baseline': True,
                  'binding_resource': 'host_memory',
                  'clauses': [{'check': 'memory',
                               'margin': -0.783203125,
                               'op': '<=',
                               'predicted': 7479296.0,
                               'resource': 'host_memory',
                               'threshold': 4194304.0,
                               'unit': 'B',
                               'verdict': 'FAIL'},
                              {'check': 'quality',
                               'margin': 0.0010010010010010019,
                               'op': '>=',
                               'predicted': 1.0,
                               'resource': 'quality',
                               'threshold': 0.999,
                               'unit': 'dimensionless',
                               'verdict': 'PASS'},
                              {'check': 'p95_latency',
                               'margin': 0.9749862435555556,
                               'op': '<=',
                               'predicted': 0.001250687822222222,
                               'resource': 'compute',
                               'threshold': 0.05,
                               'unit': 's',
                               'verdict': 'PASS'}],
                  'configuration': {'variant': 'fp32'},
                  'figures': [{'metric': 'latency', 'unit': 's', 'value': 0.0009620675555555556},
                              {'metric': 'memory_capacity', 'unit': 'B', 'value': 4194304.0},
                              {'metric': 'memory_min', 'unit': 'B', 'value': 7479296.0},
                              {'metric': 'memory_need', 'unit': 'B', 'value': 7479296.0},
                              {'metric': 'peak_rss', 'unit': 'B', 'value': 41479296.0},
                              {'metric': 'throughput', 'unit': 'request/s', 'value': 4157.712186531599}],
                  'margin': -0.783203125,
                  'role': 'state',
                  'state': {'dimensions': {'compute': {'unit': 'core', 'value': 1},
                                           'host_memory': {'unit': 'MiB', 'value': 4}}},
                  'tightest_resource': 'host_memory',
                  'verdict': 'FAIL'}],
 'provenance': {'host': 'example-host', 'started': '2026-12-03T17:44:56+00:00', 'tool': 'luma model predict'},
 'record_type': 'model-prediction'}

#: A experiment-matrix record (from the project's own fixtures and catalogue).
EXPERIMENT_MATRIX = {'configurations': [{'name': 'baseline',
                     'states': [{'binding': 'memory_bandwidth',
                                 'levels': {'accelerator_count': '2',
                                            'accelerator_type': 'nvidia-h100-sxm5-80gb',
                                            'precision': 'fp8'},
                                 'margin': 0.003135394810455938,
                                 'predicted': 'PASS',
                                 'role': 'candidate-pass'},
                                {'binding': 'memory_bandwidth',
                                 'levels': {'accelerator_count': '1',
                                            'accelerator_type': 'nvidia-h100-sxm5-80gb',
                                            'precision': 'fp8'},
                                 'margin': -0.8278748222130877,
                                 'predicted': 'FAIL',
                                 'role': 'adjacent-fail'},
                                {'levels': {'accelerator_count': '4',
                                            'accelerator_type': 'nvidia-h100-sxm5-80gb',
                                            'concurrency': '64',
                                            'precision': 'fp8'},
                                 'predicted': 'PASS',
                                 'role': 'concurrency-pass'},
                                {'binding': 'compute',
                                 'levels': {'accelerator_count': '4',
                                            'accelerator_type': 'nvidia-h100-sxm5-80gb',
                                            'concurrency': '128',
                                            'precision': 'fp8'},
                                 'predicted': 'FAIL',
                                 'role': 'concurrency-fail'}]},
                    {'intervention': 'kvzip-labs/kvzip@1.2.0',
                     'name': 'intervention',
                     'states': [{'binding': 'memory_bandwidth',
                                 'levels': {'accelerator_count': '2',
                                            'accelerator_type': 'nvidia-h100-sxm5-80gb',
                                            'precision': 'fp8'},
                                 'margin': 0.005050505050505055,
                                 'predicted': 'PASS',
                                 'role': 'candidate-pass'},
                                {'binding': 'memory_bandwidth',
                                 'levels': {'accelerator_count': '1',
                                            'accelerator_type': 'nvidia-h100-sxm5-80gb',
                                            'precision': 'fp8'},
                                 'margin': -0.804193154443249,
                                 'predicted': 'FAIL',
                                 'role': 'adjacent-fail'},
                                {'levels': {'accelerator_count': '4',
                                            'accelerator_type': 'nvidia-h100-sxm5-80gb',
                                            'concurrency': '64',
                                            'precision': 'fp8'},
                                 'predicted': 'PASS',
                                 'role': 'concurrency-pass'},
                                {'binding': 'compute',
                                 'levels': {'accelerator_count': '4',
                                            'accelerator_type': 'nvidia-h100-sxm5-80gb',
                                            'concurrency': '128',
                                            'precision': 'fp8'},
                                 'predicted': 'FAIL',
                                 'role': 'concurrency-fail'}]}],
 'contract': {'clauses': [{'metric': 'quality', 'op': '>=', 'unit': 'dimensionless', 'value': 0.99},
                          {'metric': 'p95_ttft', 'op': '<=', 'unit': 's', 'value': 1},
                          {'metric': 'p95_tpot', 'op': '<=', 'unit': 'ms', 'value': 50}],
              'name': 'llm-chat'},
 'dimension': 'accelerator_count',
 'evidence_class': 'projected',
 'model': 'llama-2-70b',
 'provenance': {'host': 'example-host', 'started': '2026-12-03T17:45:31+00:00', 'tool': 'luma partner evaluate'},
 'record_type': 'experiment-matrix',
 'repetitions': 3,
 'sha256': '68542d5e4d2635c1e31ef84fae6cefb8b53e1b18798070072041795cdf933f12'}

#: A partner-retraction record: withdraws a partner's earlier records by content hash (`luma partner remove`
#: writes these; the hash here is a placeholder: put the hash `luma partner show` gives).
PARTNER_RETRACTION = {"record_type": "partner-retraction", "evidence_class": "vendor-claim", "partner": "kvzip-labs",
                      "records": ["0" * 64], "reason": "figures superseded by version 1.3.0",
                      "provenance": {"tool": "hand-written from `luma record template`"}}

#: The examples (a function for the built ones); each names its own kind in `record_type`, so the
#: kinds stay spelled out in kb/records/kinds.py alone.
_ALL = (pex_chain, pex_trial, MACHINE, KERNEL_RESULT, OPTIMIZE_RESULT, PILOT_DECISION, INTERVENTION_PARAMETERS,
        PARTNER_RETRACTION, MODEL_PREDICTION, EXPERIMENT_MATRIX)
#: record_type -> its example.
EXAMPLES = {(e() if callable(e) else e)["record_type"]: e for e in _ALL}


def example(kind: str) -> dict:
    """A fresh copy of the example record of `kind` (KeyError for a kind without one)."""
    found = EXAMPLES[kind]
    return copy.deepcopy(found() if callable(found) else found)
