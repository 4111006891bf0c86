"""automedbench-docker: the docker sandbox (`--sandbox docker`: a container per run and a network-less
evaluator container), its images built locally from the recipes shipped here (`automedbench images build`).

A plugin of the `automedbench` entry-point group like any third party's (`plugin.py`); the core never
imports it. The docker SDK comes with the `sdk` extra (the root's `automedbench[docker]` asks for it).
"""
