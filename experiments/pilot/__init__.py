"""The Economic Control Pilot: a live service run inside the library of qualified states
(`library`), under a workload trace (`trace`), by a controller (`controller`) that observes each
window, predicts (`predict`), switches state on the running service (`serving`, `server`),
verifies the contract on live traffic (`window`), and retains or rolls back; decisions are
signed records (`records`). Energy is measured where counters exist, else simulated (`energy`).
"""
