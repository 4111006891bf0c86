"""Review of round 20's merges: what the changes broke for results and folders made before them.

- **A campaign holding a result made before round 13 broke the site**: such a result has no conditions digest
  (the store reads ""); beside a newer run of the same agent the ranking splits the agent by conditions and
  labels the older row plain `agent` (`site._who`), while round 20's stage profile labelled it `agent []`
  (`leaderboard.agent_labels`): the ranking page's stage chart looked that label up among the ranking's and
  `leaderboard --site` stopped with a ValueError.
"""

from __future__ import annotations

from automedbench_campaign.leaderboard import build
from automedbench_campaign.site import write_site
from automedbench_campaign.store import RunTable
from test_site_conditions import _row


def test_a_result_without_a_conditions_digest_beside_a_newer_run_still_makes_the_site(tmp_path):
    """Before: ValueError ('a []' is not in list) from the ranking page's stage chart. Now the site is written,
    the stage profile's labels are the ranking's, and each row keeps its own mean."""
    table = RunTable.from_rows([_row("a", "", 0.25), _row("a", "0123456789ab", 0.75)])
    board = build(table, by=("agent",), resamples=20)
    profile = board.analyses["stages"]["by_agent"]
    assert sorted(profile) == ["a", "a [0123456789ab]"]
    assert profile["a"]["stages"]["S1"]["mean"] == 0.25
    assert write_site(table, tmp_path, resamples=20, pictures=False)
    ranking = (tmp_path / "index.html").read_text()
    assert "a [0123456789ab] · S1: 0.750" in ranking and "a · S1: 0.250" in ranking
