import pytest

pytest_plugins = ["automedbench.testing"]


@pytest.fixture(scope="module")
def perfect(amb_data_root, tmp_path_factory):
    """The demo's targets written as the submission (the `perfect` baseline), and the staged case ids (the
    conformance rounds change one file of it at a time)."""
    from automedbench.testing import load_task, stage_task  # imported late: the plugin above is registered first

    track, task = load_task("synthesis/demo")
    staged = stage_task("synthesis/demo", amb_data_root)
    dest = tmp_path_factory.mktemp("perfect") / "outputs"
    track.write_baseline(task, "perfect", staged, dest)
    return dest, staged.case_ids
