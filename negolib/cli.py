"""Command line: ``python -m negolib <command>`` (or the ``negolib`` console script).

Commands:

* ``domains``: list the shipped domains and their issues;
* ``evaluate``: play chosen sellers against chosen buyers over a scenario set, write transcripts
  (resumable: a re-run with other settings refuses and says what differs; a second run on the
  same file at once refuses) and print the per-arm summary;
* ``summary``: the per-arm summary of a transcript file (validated; one protocol per file, or
  checked against ``--protocol``);
* ``book run``: execute the book's notebooks with papermill on a params profile;
* ``book site``: the executed book as a static site (Sphinx, myst-nb, the book theme: the ``site`` extra) at
  ``outputs/<profile>/site/index.html``; ``book run`` builds it at its end, or says in one line why not;
* ``book handout``: course copies of the notebooks with the exercise solutions stripped, and a ZIP of them;
* ``train``: a GRPO training run from a params profile;
* ``lesson-seeds``: the profile's matched lesson trained at several training seeds from one start, each evaluated
  on the book's held-out scenarios (resumable): one table row per seed and how many gained;
* ``genius export`` / ``genius import``: one of our scenarios as a Genius folder, a Genius (ANAC) folder as a
  scenario file (``--genius`` on ``evaluate`` and ``tournament --game multi_issue`` plays either; docs/genius.md);
* ``tournament``: a round robin of a registered game's agents (resumable; without ``--agents``, the game's
  default agents): cross-table, per-agent summary and Bradley-Terry ratings with seed-cluster intervals,
  written as CSV files and figures;
* ``serve``: a registered game behind OpenEnv's server API (HTTP and WebSocket sessions; loopback by default;
  needs the ``envs`` extra).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from negolib.core.errors import NegolibError

SUMMARY_METRICS = ("score", "deal_rate", "deal_utility", "welfare", "mean_turns", "bad_parse_rate",
                   "invalid_accept_rate")


def _csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def cmd_domains(args: argparse.Namespace) -> int:
    from negolib.games.multi_issue.domains import load_domains

    for d in load_domains().values():
        tag = " (held out)" if d.held_out else ""
        print(f"{d.name}{tag}: {d.title}")
        for i in d.issues:
            what = f"{i.lo:g}-{i.hi:g} {i.unit}" if i.kind == "continuous" else " / ".join(map(str, i.levels))
            print(f"    {i.name:<20} {i.kind:<12} {what}")
    return 0


def cmd_games(args: argparse.Namespace) -> int:
    from negolib.games import list_games

    for name, summary in list_games():
        print(f"{name}: {summary}")
    return 0


def summary_table(df):  # type: ignore[no-untyped-def]
    """Per (arm, buyer) and pooled per arm: S, deal rate, deal-only U~, welfare, turns, bad parses."""
    import pandas as pd

    from negolib.games.multi_issue.metrics import arm_table

    pooled = arm_table(df, SUMMARY_METRICS).assign(buyer="(all)")
    per_buyer = [arm_table(sub, SUMMARY_METRICS).assign(buyer=b) for b, sub in df.groupby("buyer")]
    out = pd.concat([pooled, *per_buyer]).reset_index().set_index(["arm", "buyer"]).sort_index()
    return out


def _print_summary(df) -> None:  # type: ignore[no-untyped-def]
    import pandas as pd

    with pd.option_context("display.width", 160, "display.max_columns", 20, "display.float_format",
                           "{:.3f}".format):
        print(summary_table(df))


def cmd_evaluate(args: argparse.Namespace) -> int:
    from negolib.core.transcripts import RunSettings, TranscriptStore, episode_settings
    from negolib.games.multi_issue.env import EnvConfig
    from negolib.games.multi_issue.rollout import make_specs, run_episodes
    from negolib.games.multi_issue.scenarios import eval_seeds, scenario_set
    from negolib.games.multi_issue.scripted import make_scripted

    sellers, buyers = _csv(args.sellers), _csv(args.buyers)
    agents = {n: make_scripted(n, seed=args.agent_seed) for n in {*sellers, *buyers}}
    if args.genius:
        from negolib.games.multi_issue.imported import load_imported

        scenarios = [load_imported(args.genius, discount=not args.no_discount, seller=args.seller_profile)]
    else:
        scenarios = scenario_set(eval_seeds(args.seeds), _csv(args.domains) if args.domains else None)
    config = EnvConfig(max_rounds=args.max_rounds, first_mover=args.first_mover)
    specs = [sp for s in sellers for sp in make_specs(s, s, buyers, scenarios, config)]
    settings = RunSettings({(s, b): episode_settings(config, agents[s].settings(), agents[b].settings(),
                                                     agent_seed=args.agent_seed)
                            for s in sellers for b in buyers})
    store = TranscriptStore(args.out, settings)
    with store.run_lock():
        res = run_episodes(specs, agents, store, progress=not args.no_progress)
    print(f"{len(res.records)} episodes played, {res.skipped} already complete in {args.out}"
          + (f", {len(res.errors)} error rows (re-run to complete them)" if res.errors else ""))
    df = store.to_dataframe()
    _print_summary(df[df["arm"].isin(sellers) & df["buyer"].isin(buyers)])
    return 1 if res.errors else 0


def cmd_summary(args: argparse.Namespace) -> int:
    from negolib.core.transcripts import TranscriptStore

    store = TranscriptStore(args.path)
    if not store.path.exists():
        print(f"error: no transcript file at {args.path}", file=sys.stderr)
        return 2
    if store.path.is_file() and store.path.stat().st_size == 0:
        print(f"error: {args.path}: empty file (no records)", file=sys.stderr)
        return 2
    if args.protocol:
        from negolib.study.evaluation import DeviationLog, evaluation_frame, load_protocol, protocol_hash

        protocol = load_protocol(args.protocol)
        df = evaluation_frame(store.records(mixed_protocols=True), protocol_hash(protocol),
                              DeviationLog.for_protocol(args.protocol))
    else:
        df = store.to_dataframe()
    if df.empty:
        print(f"error: {args.path}: no complete episodes", file=sys.stderr)
        return 2
    _print_summary(df)
    return 0


def cmd_book(args: argparse.Namespace) -> int:
    from negolib.book.runner import run_book

    notebooks = _csv(args.notebooks) if args.notebooks else None
    result = run_book(args.params, notebooks=notebooks, output_dir=args.output_dir,
                      resume=not args.no_resume, progress=not args.no_progress)
    print(result)
    if not args.no_site:
        from negolib.book.site import site_after_run

        print(site_after_run(result.output_dir, f"negobook: {result.profile}", _description(args.params)))
    return 0 if getattr(result, "ok", True) else 1


def _description(params_path: str) -> str:
    from negolib.params import load_params

    return load_params(params_path).description


def cmd_site(args: argparse.Namespace) -> int:
    from negolib.book.site import SiteError, build_site
    from negolib.params import load_params

    params = load_params(args.params)
    if args.output_dir:
        params = params.with_output_dir(args.output_dir)
    try:
        index = build_site(params.out, f"negobook: {params.profile}", params.description)
    except SiteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"site: {index}")
    return 0


def cmd_handout(args: argparse.Namespace) -> int:
    from negolib.book.handout import default_zip_path, make_handout

    notebooks = _csv(args.notebooks) if args.notebooks else None
    counts = make_handout(args.out, notebooks, write_zip=not args.no_zip)
    for name, n in counts.items():
        print(f"{args.out}/{name}.ipynb: {n} solution(s) stripped")
    if not args.no_zip:
        print(f"{default_zip_path(args.out)}: the handout as a project that opens in JupyterLab (unzip, "
              "pip install -e ., jupyter lab notebooks/)")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from negolib.agents.factory import ModelCache
    from negolib.params import load_params
    from negolib.study.runs import train_run

    params = load_params(args.params)
    if args.output_dir:
        params = params.with_output_dir(args.output_dir)
    runs = [r for r in params.training.runs if not args.runs or r in _csv(args.runs)]
    if not runs:
        print(f"error: no training runs selected in {args.params}", file=sys.stderr)
        return 2
    cache = ModelCache()
    for run in runs:  # in file order: a continuation (run@step) follows its parent
        for seed in params.training.runs[run].seeds:
            result = train_run(params, run, seed, progress=not args.no_progress, resume=not args.no_resume,
                               cache=cache)
            print(f"{run} (seed {seed}): {result}")
    return 0


def _seed_list(text: str) -> list[int]:
    """``0-7`` or ``0,3,5`` (or both: ``0-3,7``) as a list of seeds."""
    seeds: list[int] = []
    for part in _csv(text):
        lo, _, hi = part.partition("-")
        seeds += list(range(int(lo), int(hi) + 1)) if hi else [int(lo)]
    return seeds


def cmd_lesson_seeds(args: argparse.Namespace) -> int:
    from negolib.params import load_params
    from negolib.study.lesson_seeds import lesson_seed_sweep, sweep_markdown, sweep_summary

    params = load_params(args.params)
    if args.output_dir:
        params = params.with_output_dir(args.output_dir)
    try:
        seeds = _seed_list(args.seeds)
    except ValueError:
        print(f"error: --seeds {args.seeds!r}: give seeds as 0-7 or 0,3,5", file=sys.stderr)
        return 2
    out = args.out or str(params.out / "lesson_seeds")
    rows = lesson_seed_sweep(params, seeds, out)
    print("\n".join(sweep_markdown(rows)))
    print(sweep_summary(rows).line())
    return 0


def cmd_tournament(args: argparse.Namespace) -> int:
    from pathlib import Path

    import pandas as pd

    from negolib.core.files import atomic_write_text
    from negolib.games import get_game
    from negolib.study.report.tournament import (
        agent_summary_display,
        cross_table_display,
        cross_table_figure,
        ratings_display,
        ratings_figure,
    )
    from negolib.tournament import agent_summary, cross_table, ratings, run_tournament

    game = get_game(args.game)
    if args.genius:
        if args.game != "multi_issue":
            print("error: --genius plays the multi_issue game only", file=sys.stderr)
            return 2
        from negolib.games.multi_issue import MultiIssueGame
        from negolib.games.multi_issue.imported import load_imported

        game = MultiIssueGame(scenarios=[load_imported(args.genius, discount=not args.no_discount,
                                                       seller=args.seller_profile)])
    agents = _csv(args.agents) if args.agents else list(game.default_agents())
    if not args.agents:
        print(f"{game.name}: no --agents given; playing the game's default agents: {', '.join(agents)}")
    res = run_tournament(game, agents, args.seeds, args.out, seed=args.agent_seed, progress=not args.no_progress,
                         retry_errors=args.retry_errors)
    n_episodes = len(res.frame)
    print(f"{game.name}: {res.played} matches played, {res.skipped} already complete in {res.path} "
          f"({len(agents)} agents, {n_episodes} episodes"
          + (f", {res.n_errors} error episodes left out (--retry-errors plays their matches again)"
             if res.n_errors else "") + ")")
    cross, summary, rating = cross_table(res.frame), agent_summary(res.frame), ratings(res.frame)
    out = Path(args.out)
    for name, frame in (("cross_table", cross), ("agents", summary), ("ratings", rating)):
        atomic_write_text(out / f"{name}.csv", frame.to_csv())
    for name, fig in (("cross_table", cross_table_figure(cross, label=f"seller's {game.payoff_label}")),
                      ("ratings", ratings_figure(rating))):
        fig.savefig(out / f"{name}.png", dpi=120)
    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.max_colwidth", 40):
        print(f"\ncross-table: seller's / buyer's mean {game.payoff_label} (deal rate)")
        print(cross_table_display(cross).to_string())
        print(f"\nper agent: mean {game.payoff_label} over both roles and all opponents, 95% seed-cluster CI")
        print(agent_summary_display(summary).to_string())
        print("\nratings: Bradley-Terry on paired comparisons (both roles per scenario), Elo scale, 95% CI")
        print(ratings_display(rating).to_string())
    files = ("cross_table.csv", "agents.csv", "ratings.csv", "cross_table.png", "ratings.png")
    print("\nwritten: " + ", ".join(str(out / n) for n in files))
    return 0


def cmd_headline(args: argparse.Namespace) -> int:
    """The results table (markdown, one row per run and contrast) from book runs' ``headline.json`` files."""
    from pathlib import Path

    from negolib.core.headline import headline_markdown

    missing = [p for p in args.paths if not Path(p).is_file()]
    if missing:
        print(f"no such headline file: {', '.join(missing)} (a book run writes outputs/<profile>/headline.json)",
              file=sys.stderr)
        return 2
    print(headline_markdown(args.paths), end="")
    return 0


def cmd_genius(args: argparse.Namespace) -> int:
    from negolib.games.multi_issue.domains import get_domain
    from negolib.games.multi_issue.genius import export_scenario, read_genius_folder
    from negolib.games.multi_issue.imported import save_scenario_file
    from negolib.games.multi_issue.scenarios import make_scenario

    if args.genius_command == "export":
        files = export_scenario(make_scenario(get_domain(args.domain), args.seed), args.out)
        print("written: " + ", ".join(map(str, files)))
        return 0
    scenario = read_genius_folder(args.folder, seller=args.seller_profile)
    path = save_scenario_file(scenario, args.out, source=str(args.folder))
    d = scenario.domain
    print(f"{d.name}: {len(d.issues)} issues ({', '.join(f'{i.name} {i.kind}' for i in d.issues)}); "
          f"reservations {scenario.seller.reservation:g} / {scenario.buyer.reservation:g}, "
          f"discounts {scenario.seller.discount:g} / {scenario.buyer.discount:g}; written: {path}")
    return 0


def _genius_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--genius", default="", help="play one imported scenario: a Genius folder or a scenario file "
                   "from `genius import` (instead of the evaluation seeds)")
    p.add_argument("--seller-profile", default=None, help="with a Genius folder: the seller's profile file "
                   "(default: the file named *seller*, else the first by name)")
    p.add_argument("--no-discount", action="store_true", help="play the imported scenario undiscounted")


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from negolib.envs.openenv_server import serve
    except ImportError as exc:
        raise ValueError(f"serving needs the envs extra (pip install -e '.[envs]'): {exc}") from None
    print(f"serving {args.game} (OpenEnv API) on http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    serve(args.game, host=args.host, port=args.port, max_sessions=args.max_sessions, opponent=args.opponent)
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="negolib", description="negobook: RL-trained negotiating sellers")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("domains", help="list the domains and their issues")
    p.set_defaults(fn=cmd_domains)

    p = sub.add_parser("games", help="list the registered games, a line each")
    p.set_defaults(fn=cmd_games)

    p = sub.add_parser("evaluate", help="play scripted sellers against scripted buyers")
    p.add_argument("--sellers", default="fixed_offer,boulware,hardheaded",
                   help="comma-separated scripted strategies (each becomes an arm)")
    p.add_argument("--buyers", default="hardheaded,conceder", help="comma-separated scripted buyers")
    p.add_argument("--seeds", type=int, default=64, help="evaluation seeds per domain (64 = paper)")
    p.add_argument("--domains", default="", help="comma-separated domains (default: all nine)")
    p.add_argument("--max-rounds", type=int, default=12)
    p.add_argument("--first-mover", choices=("seller", "buyer"), default="seller")
    p.add_argument("--agent-seed", type=int, default=0)
    _genius_args(p)
    p.add_argument("--out", default="outputs/cli/transcripts.jsonl", help="transcript file (resumable)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(fn=cmd_evaluate)

    p = sub.add_parser("summary", help="per-arm summary of a transcript file")
    p.add_argument("path")
    p.add_argument("--protocol", default=None,
                   help="frozen protocol file: every record must carry its hash (or an arm named by a "
                        "deviation in its log); default: the file must hold records of one protocol")
    p.set_defaults(fn=cmd_summary)

    p = sub.add_parser("headline", help="the results table from book runs' headline.json files (markdown)")
    p.add_argument("paths", nargs="+", help="outputs/<profile>/headline.json files")
    p.set_defaults(fn=cmd_headline)

    book = sub.add_parser("book", help="execute the book").add_subparsers(dest="book_command", required=True)
    p = book.add_parser("run", help="execute the notebooks with papermill")
    p.add_argument("--params", required=True, help="params profile, e.g. params/default.yaml")
    p.add_argument("--notebooks", default="", help="comma-separated notebook names or prefixes (default: all)")
    p.add_argument("--output-dir", default=None)
    p.add_argument("--no-resume", action="store_true", help="re-execute notebooks already done")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--no-site", action="store_true", help="skip building the static site at the end")
    p.set_defaults(fn=cmd_book)
    p = book.add_parser("site", help="the executed book as a static site: outputs/<profile>/site/index.html")
    p.add_argument("--params", required=True, help="params profile, e.g. params/default.yaml")
    p.add_argument("--output-dir", default=None, help="the executed book's folder (default: the profile's)")
    p.set_defaults(fn=cmd_site)
    p = book.add_parser("handout", help="course handout: the notebooks with exercise solutions stripped")
    p.add_argument("--out", default="handout", help="folder for the handout notebooks (the ZIP goes beside it)")
    p.add_argument("--no-zip", action="store_true", help="write the folder only, not <out>.zip")
    p.add_argument("--notebooks", default="", help="comma-separated notebook names or prefixes (default: all)")
    p.set_defaults(fn=cmd_handout)

    p = sub.add_parser("train", help="GRPO training runs of a params profile (resumable)")
    p.add_argument("--params", required=True)
    p.add_argument("--runs", default="", help="comma-separated run names (default: every run of the profile)")
    p.add_argument("--output-dir", default=None)
    p.add_argument("--no-resume", action="store_true")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(fn=cmd_train)

    p = sub.add_parser("lesson-seeds", help="the matched lesson at several training seeds (resumable)")
    p.add_argument("--params", required=True)
    p.add_argument("--seeds", default="0-3", help="training seeds: 0-7, 0,3,5 or 0-3,7 (default 0-3)")
    p.add_argument("--out", default=None, help="output folder (default: outputs/<profile>/lesson_seeds)")
    p.add_argument("--output-dir", default=None, help="the profile's output folder (where the book's start is)")
    p.set_defaults(fn=cmd_lesson_seeds)

    p = sub.add_parser("tournament", help="round robin of a game's agents in both roles (resumable)")
    p.add_argument("--game", required=True, help="a registered game (see `negolib games`)")
    p.add_argument("--agents", default="", help="comma-separated agent names of the game (e.g. its scripted "
                   "strategies); every agent meets every agent, itself included, in both roles (default: the "
                   "game's default agents, e.g. a market's scripted sellers against its scripted buyer pool)")
    p.add_argument("--seeds", type=int, default=8, help="seeds (bootstrap clusters) per stratum of the game")
    p.add_argument("--agent-seed", type=int, default=0, help="the agents' seed")
    p.add_argument("--out", required=True, help="output folder: matches.jsonl (resumable), CSV tables, figures")
    _genius_args(p)
    p.add_argument("--retry-errors", action="store_true",
                   help="play again the matches holding error episodes (default: errors are final, left out)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(fn=cmd_tournament)

    genius = sub.add_parser("genius", help="Genius XML: export one of our scenarios, import a Genius folder"
                            ).add_subparsers(dest="genius_command", required=True)
    p = genius.add_parser("export", help="write a scenario's domain and both profiles as Genius XML")
    p.add_argument("--domain", required=True, help="one of our domains (see `negolib domains`)")
    p.add_argument("--seed", type=int, required=True, help="the scenario's seed")
    p.add_argument("--out", required=True, help="output folder")
    p.set_defaults(fn=cmd_genius)
    p = genius.add_parser("import", help="convert a Genius scenario folder into a scenario file")
    p.add_argument("folder", help="a folder with one Genius domain file and two profiles")
    p.add_argument("--out", required=True, help="the scenario file to write (YAML)")
    p.add_argument("--seller-profile", default=None, help="the seller's profile file (default: the file named "
                   "*seller*, else the first by name)")
    p.set_defaults(fn=cmd_genius)

    p = sub.add_parser("serve", help="serve a game with OpenEnv's server API (reset/step/state/schema, WebSocket)")
    p.add_argument("--game", required=True, help="a registered game (see `negolib games`)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-sessions", type=int, default=64, help="concurrent WebSocket sessions allowed")
    p.add_argument("--opponent", default=None, help="the default built-in opponent (a reset may name another)")
    p.set_defaults(fn=cmd_serve)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m negolib``."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args) or 0)
    except (NegolibError, ValueError, KeyError, OSError) as exc:
        if os.environ.get("NEGOLIB_DEBUG"):
            raise
        text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        print(f"error: {text}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
