"""The rule engine (loader, analysis, engine, the isolated run, explanations, sealing) and the shipped rule files (`*.rq`)."""
