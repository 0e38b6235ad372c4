"""The command tree of `luma`: its groups and, per command, where it lives ("module:attribute")
and its one-line help (the first sentence of its docstring), so that `luma --help` and `luma GROUP
--help` list commands without importing their modules (cli/lazy.py; tests/cli/test_lazy.py keeps
each entry equal to its command). `luma kb`, `luma sprint` and `luma model` keep theirs in their
packages' `__init__`."""

from __future__ import annotations

from luma.cli.lazy import LazyGroup


campaign = LazyGroup("campaign", help=(
    "Campaigns: the same contracts challenged across machine classes, one sprint per contract, dimension and "
    "class, placed by Ray on runners that `luma runner join` a cluster."), lazy={
    "bench": ("luma.cli.campaign_bench:bench_cmd",
        "What a campaign costs the fleet engine and the head, on a live cluster: a unit-shaped Ray task (class "
        "labels, trusted-key selector, runner slot) against an empty task with Ray's defaults measured in the "
        "same run, `ray.nodes()`, and the head's ingest per sprint."),
    "cancel": ("luma.cli.campaign:cancel_cmd",
        "Stop campaign ID: its head cancels the sprints still queued or running (their records are never taken "
        "in); what is already recorded stays."),
    "plan": ("luma.cli.campaign:plan_cmd",
        "Sprints, most trials and expected wall time per machine class of the campaign FILE."),
    "run": ("luma.cli.campaign:run_cmd",
        "Run the campaign FILE on the cluster: each sprint on a trusted runner of its class, its signed records "
        "ingested here all at once."),
    "status": ("luma.cli.campaign:status_cmd",
        "The campaigns of this project, or one campaign's sprints (ID as `luma campaign run` named it)."),
})

endpoint = LazyGroup("endpoint", help=(
    "Services behind an OpenAI-compatible HTTP endpoint (vLLM, SGLang, TGI, llama.cpp ...)."), lazy={
    "bench": ("luma.cli.endpoint_bench:bench_cmd",
        "LUMA's endpoint load generator against NVIDIA AIPerf on the same llama.cpp servers (one core each): same"
        " texts, body fields and load; per metric each tool's figure per pass, the ratio of LUMA's mean to "
        "AIPerf's and whether it is within 10 %."),
    "probe": ("luma.cli.engine:probe_cmd",
        "Judge a server that is already running against CONTRACT's clauses, at whatever state it runs in: the "
        "contract's load, the sprint's statistics, one verdict per trial."),
})

engine = LazyGroup("engine", help=(
    "Serving engines on this host: llama.cpp (through llama-cpp-python) and its model converter, vLLM's CPU build."), lazy={
    "install": ("luma.cli.engine:install_cmd", "Install the serving engine NAME on this host."),
    "status": ("luma.cli.engine:status_cmd",
        "What this environment has of each engine (version, converter, cache folder)."),
})

kernels = LazyGroup("kernels", help=(
    "The int8 quantization family: accuracy and speed."), lazy={
    "bench": ("luma.cli.kernels:bench", "Quantize throughput vs copy bandwidth; int8 Linear vs fp32 and the peers."),
    "evaluate": ("luma.cli.kernels:evaluate", "Accuracy of fp32 against quantized variants of a real model."),
    "pareto": ("luma.cli.kernels:pareto",
        "Per-layer sensitivity on calibration data, then the accuracy-memory Pareto front (plot + data)."),
    "tune": ("luma.cli.kernels_tune:tune",
        "Measure the int8 GEMM paths per shape class again and keep the fastest in the kernel cache."),
})

machine = LazyGroup("machine", help=(
    "Machine parameter records: measure this host, list and show machines."), lazy={
    "characterize": ("luma.cli.machine_characterize:characterize_cmd",
        "Measure this host (memory bandwidth, fp32/bf16/int8 matmul throughput per core count, usable memory) and"
        " record it as a measured machine record, signed with the project's runner key (made on first use; with "
        "--no-ingest only a key the project has signs it)."),
    "list": ("luma.cli.machine:list_cmd",
        "The shipped catalog (vendor claims) and the machines recorded in this project's KB."),
    "show": ("luma.cli.machine:show_cmd",
        "One machine's figures: a machine in this project's KB (the latest of that name), a shipped catalog "
        "entry, or a machine record file."),
})

partner = LazyGroup("partner", help=(
    "Partner records: intervention parameters, kept in per-partner named graphs."), lazy={
    "add": ("luma.cli.partner:add_cmd",
        "Validate intervention parameter FILES (TOML, YAML, JSON; at most 1 MiB each) and add them, all or "
        "nothing."),
    "evaluate": ("luma.cli.partner_evaluate:evaluate",
        "Project whether the intervention of RECORD (a record file, or an ingested record's hash prefix or name) "
        "moves the accepted-service frontier of the contract after its own costs: minimum machine state, "
        "concurrency, accelerator count, memory tier, cost and energy per accepted output, the binding resource "
        "next; with the experiment matrix that proves it."),
    "list": ("luma.cli.partner:list_cmd",
        "Every partner of this project: records live and removed, interventions, data classes."),
    "remove": ("luma.cli.partner:remove_cmd", "Withdraw a partner's records (all, or --record)."),
    "show": ("luma.cli.partner:show_cmd",
        "A partner's records (NAME), or one record (a content-hash prefix or a record name) with its figures in "
        "the units given and in SI."),
})

pilot = LazyGroup("pilot", help=(
    "Run a live service inside the library of qualified states (Economic Control Pilot)."), lazy={
    "library": ("luma.cli.pilot:library_cmd",
        "The states a pilot of CONTRACT may apply: attested, measured, non-stale, on this machine."),
    "run": ("luma.cli.pilot:run_cmd",
        "Serve CONTRACT's service under a trace, switching among qualified states to cut cost."),
})

report = LazyGroup("report", help=(
    "Reports rendered from the knowledge base (Markdown + self-contained HTML)."), lazy={
    "boundary": ("luma.cli.report:boundary_cmd",
        "Resource Boundary Report of one PEX chain: CHAIN (an IRI such as id:chain/…), --sprint ID, or --latest "
        "qualified chain."),
    "design-in": ("luma.cli.report:design_in_cmd",
        "Design-In Report: hardware requirements, their candidate capability classes ranked by support x economic"
        " gain, the lifetime economics (projected, with every price's source), counter-evidence, recurring "
        "remedies, derivations, and the evidence of each class (needs `luma rules run` first)."),
    "partner": ("luma.cli.report:partner_cmd",
        "Partner Evaluation Report of RECORD (a record file, or an ingested record's hash prefix or name): the "
        "partner's stated figures, the projected frontier change after its own costs, and the frozen experiment "
        "matrix (also written as matrix.json) that a PEX sprint runs to prove it."),
    "pilot": ("luma.cli.report:pilot_cmd",
        "Economic Control Report of one pilot run (`luma pilot run`), from its pilot.json alone: RUN (a run id "
        "under $LUMA_HOME/pilots/, or a pilot.json or its folder), or the --latest run."),
})

rules = LazyGroup("rules", help=(
    "Declarative rules: qualification, recurrences, hardware requirements."), lazy={
    "bench": ("luma.cli.rules_bench:bench_cmd",
        "The rule set to fixpoint on synthetic chains: full run, re-run, incremental run, rdflib beside it."),
    "check": ("luma.cli.rules:check_cmd",
        "Validate every rule file and the dependency graph (no cycle through negation)."),
    "list": ("luma.cli.rules:list_cmd", "The rules, in the order they run, with their parameters."),
    "run": ("luma.cli.rules:run_cmd",
        "Derive: every stratum to its fixpoint; prints per rule its results (nodes of the class it derives: new, "
        "changed, removed), its quads, how it was evaluated (full, delta = over new records only, skip = nothing "
        "it reads changed), with timing."),
})

runner = LazyGroup("runner", help=(
    "Runner keys: the Ed25519 keys that sign measured records, and which of them this project trusts."), lazy={
    "join": ("luma.cli.runner_join:join_cmd",
        "Join the Ray cluster at ADDRESS as a LUMA runner: this machine's labels (ISA, CPUs, memory, accelerator;"
        " your --label ones), its runner key's fingerprint, and one runner slot, so campaigns place one sprint at"
        " a time here."),
    "keygen": ("luma.cli.runner:keygen_cmd",
        "Make an Ed25519 key pair under $LUMA_HOME/keys/ (private key mode 0600, never printed) and trust it in "
        "this project."),
    "list": ("luma.cli.runner:list_cmd",
        "Every runner key this project has trusted: name, fingerprint, partner, since, revoked."),
    "revoke": ("luma.cli.runner:revoke_cmd", "Stop trusting runner key NAME (or fingerprint)."),
    "sign": ("luma.cli.runner:sign_cmd",
        "Sign every record of FILES (JSON, JSON Lines, YAML) over its content hash, adding an attestation block."),
    "trust": ("luma.cli.runner:trust_cmd",
        "Trust the runner key PUBKEY: base64 of the raw 32-byte Ed25519 public key, or a file holding it (a .pub "
        "file from `luma runner keygen`, or a PEM public key)."),
})


#: The top group's commands (cli/main.py).
TOP = {
    "campaign": ("luma.cli.groups:campaign",
        "Campaigns: the same contracts challenged across machine classes, one sprint per contract, dimension and "
        "class, placed by Ray on runners that `luma runner join` a cluster."),
    "chain": ("luma.cli.evidence_groups:chain",
        "PEX chains assembled from trial records already in the ledger (imported or measured)."),
    "demo": ("luma.cli.demo:demo",
        "The whole loop: example records and RDF, a rejected record, a short qualification sprint (matvec-memory,"
        " measured on this machine), the shipped evidence set, the rules, `luma kb query`, a partner's record with "
        "its projected evaluation, and the Resource Boundary and Design-In (also of the shipped set alone) and "
        "Partner Evaluation reports."),
    "endpoint": ("luma.cli.groups:endpoint",
        "Services behind an OpenAI-compatible HTTP endpoint (vLLM, SGLang, TGI, llama.cpp ...)."),
    "engine": ("luma.cli.groups:engine",
        "Serving engines on this host: llama.cpp (through llama-cpp-python) and its model converter, vLLM's CPU build."),
    "evidence": ("luma.cli.evidence_groups:evidence",
        "The evidence set shipped with LUMA: signed measured records from every machine the project's own sprints "
        "ran on."),
    "import": ("luma.cli.evidence_groups:importer",
        "Import what other tools measured: serving benchmarks' result files as trials, published MLPerf results "
        "as third-party evidence."),
    "kb": ("luma.cli.kb:kb", "The evidence ledger and the knowledge base projected from it."),
    "kernels": ("luma.cli.groups:kernels", "The int8 quantization family: accuracy and speed."),
    "machine": ("luma.cli.groups:machine", "Machine parameter records: measure this host, list and show machines."),
    "model": ("luma.cli.model:model",
        "Predict PASS/FAIL and binding resources analytically; explore state spaces (simulated or projected "
        "evidence: it narrows the search, PEX trials qualify)."),
    "partner": ("luma.cli.groups:partner",
        "Partner records: intervention parameters, kept in per-partner named graphs."),
    "pilot": ("luma.cli.groups:pilot",
        "Run a live service inside the library of qualified states (Economic Control Pilot)."),
    "record": ("luma.cli.evidence_groups:record", "Write records by hand: complete, commented skeletons of each record kind."),
    "report": ("luma.cli.groups:report", "Reports rendered from the knowledge base (Markdown + self-contained HTML)."),
    "rules": ("luma.cli.groups:rules", "Declarative rules: qualification, recurrences, hardware requirements."),
    "runner": ("luma.cli.groups:runner",
        "Runner keys: the Ed25519 keys that sign measured records, and which of them this project trusts."),
    "sprint": ("luma.cli.sprint:sprint", "Qualify resource boundaries with physical trials on this machine."),
}
