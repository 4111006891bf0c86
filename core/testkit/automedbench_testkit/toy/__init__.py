"""A pure-Python toy track for tests of the engine and of plugins: no numpy, no images, seconds to run.

Each case is a short word in `input.txt`; the output `answer.txt` holds its number of vowels. It is not
registered by the core: the test kit (automedbench-testkit) registers it through the entry-point group, as
any third-party track is registered.
"""
