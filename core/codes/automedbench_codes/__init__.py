"""AutoMedBench error codes: the post-run tagging step and the track-independent detectors (E1–E5).

A plugin of the `automedbench` entry-point group like a third party's: the core holds the taxonomy and the
detector interface (automedbench.detectors), tracks register their own detectors, and this distribution runs
them after each run (`automedbench_tag_codes`). Without it a run records no codes, and a note says why.
"""
