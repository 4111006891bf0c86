"""The core's own track: vowel counting in pure Python (no numpy, no images, seconds to run), so the core
installed alone has a task to run (`automedbench run --task toy/vowels --agent reference`) and tests of the
engine and of plugins have one that needs no medical track.

Each case is a short word in `input.txt`; the output `answer.txt` holds its number of vowels. It is written
against `automedbench.api` only and registered through the entry-point group (the core's entry point `toy`),
as any third-party track is; the rest of the core never imports it (tests/test_layering.py).
"""
