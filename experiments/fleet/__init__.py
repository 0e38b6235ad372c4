"""Many machines, one campaign: contracts × machine classes run as sprints on a Ray cluster.

`campaign` reads a campaign file and names its units (one sprint per contract, dimension and
machine class); `planner` estimates trials and duration per class; `labels` says what a runner
machine advertises; `node` runs one unit on a runner machine and signs its records there;
`head` places the units on the cluster, takes the signed records back into the ledger and KB,
and resumes from the ledger; `overhead` measures what a campaign costs Ray and the head
(`luma campaign bench`). Ray (an optional extra) is imported only inside the functions of `node`,
`head` and `overhead` that need it, and by `luma runner join`.
"""
