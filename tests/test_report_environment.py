"""Notebook 1's report: the domains' schemas and Figure 1 (one episode's ledger, turn by turn)."""

from __future__ import annotations

from paper_frames import played

from negolib.games.multi_issue.domains import load_domains
from negolib.study.report.environment import domain_table, domains_overview, figure1, ledger_frames


def test_domain_tables():
    domains = load_domains()
    over = domains_overview(domains).frame
    assert len(over) == 9 and bool(over.loc["car", "held out"]) and over.loc["car", "issues"] == 10
    car = domain_table(domains["car"])
    assert car.name == "domain_car" and "(held out)" in car.title and len(car.frame) == 10


def test_figure1_draws_one_episode():
    import matplotlib

    matplotlib.use("Agg")
    records, _ = played()
    rec = next(r for r in records if r["domain"] == "car")
    values, phis, utils = ledger_frames(rec)
    assert len(values) == len(phis) == len(utils) == len(rec["turns"])
    assert utils[["seller U~", "buyer U~"]].stack().between(0, 1).all()
    fig = figure1(rec)
    assert len(fig.axes) == 2 and rec["domain"] in fig._suptitle.get_text()
