"""Training recipes, one per stage, dispatched from ``engine.train.workflow.STAGES``."""
