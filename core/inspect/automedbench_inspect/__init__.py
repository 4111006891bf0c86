"""AutoMedBench inside inspect_ai: every installed task as an inspect task (`inspect eval automedbench_inspect/
segmentation_demo`), run by any inspect model and agent in the AutoMedBench sandbox, through the real runner,
and scored by its isolated evaluator and judge. `plugin` registers the runner's end (the `inspect` agent);
`_registry` is inspect's entry point (tasks, solvers, scorer, the `automedbench` sandbox environment)."""
