"""Training the local judge. Installed as ``judgegraph.finetune``."""
