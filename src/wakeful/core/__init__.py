"""The core: the records and interfaces every other part of wakeful depends on, and nothing else."""
