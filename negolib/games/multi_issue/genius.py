"""Genius XML both ways: export one of our scenarios exactly, import a Genius/ANAC scenario folder faithfully.

Genius's format: a domain file (``<negotiation_template><utility_space><objective>`` with ``<issue>``
elements: discrete ``<item value=..>``, or ``integer`` / ``real`` issues with bounds) and one profile
per party (``<utility_space>``: a ``<weight>`` per issue, an ``evaluation`` per discrete item or a
linear ``<evaluator ftype="linear" slope offset>`` for a numeric issue, optional ``<reservation
value>`` and ``<discount_factor value>``). Genius's utility is U = sum_i w_i e_i(v) with a discrete
evaluation divided by the issue's largest one.

* **Export** (:func:`export_scenario`): continuous terms become real issues with linear evaluators
  (e = (phi + 1) / 2), categorical and binary terms discrete issues (evaluation 1 at the party's
  preferred level, 0 elsewhere; binary levels ``yes`` / ``no``), weights and reservation values as
  drawn; Genius's U of a complete contract is then our U~ exactly.
* **Import** (:func:`read_genius_folder`): discrete issues become ``table`` issues (evaluation over
  the largest), integer issues ``table`` issues over their integers (the linear evaluator's values),
  real issues continuous issues with the party's evaluations at both ends. Roles come from the
  profile file names (one containing ``seller`` or ``buyer``), else from ``seller=`` (a file name or
  stem), else the first profile by name is the seller. The result is a fixed :class:`Scenario`
  (seed 0) whose domain is ``imported``; :mod:`.imported` writes and reads it as a scenario file.

Malformed XML raises :class:`negolib.core.errors.ValidationError` naming the file and the field.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from negolib.core.errors import ValidationError
from negolib.games.multi_issue.domains import Domain, Issue
from negolib.games.multi_issue.scenarios import PartyPrefs, Role, Scenario

MAX_INTEGER_LEVELS = 1000
WEIGHT_TOL = 1e-6
EVAL_TOL = 1e-9
BINARY_LABELS = {True: "yes", False: "no"}


# --------------------------------------------------------------------------- export


def _fmt(x: float) -> str:
    return repr(float(x))


def _level_text(issue: Issue, level: Any) -> str:
    return BINARY_LABELS[level] if issue.kind == "binary" else str(level)


def domain_xml(domain: Domain) -> str:
    """The Genius domain file of one of our domains (issue order kept, indices from 1)."""
    root = ET.Element("negotiation_template")
    space = ET.SubElement(root, "utility_space", number_of_issues=str(len(domain.issues)))
    obj = ET.SubElement(space, "objective", index="0", description=domain.title, name=domain.name,
                        type="objective", etype="objective")
    for k, issue in enumerate(domain.issues, start=1):
        if issue.kind == "continuous":
            el = ET.SubElement(obj, "issue", name=issue.name, index=str(k), etype="real", type="real",
                               vtype="real", lowerbound=_fmt(issue.lo), upperbound=_fmt(issue.hi))
            ET.SubElement(el, "range", lowerbound=_fmt(issue.lo), upperbound=_fmt(issue.hi))
        else:
            el = ET.SubElement(obj, "issue", name=issue.name, index=str(k), etype="discrete", type="discrete",
                               vtype="discrete")
            for j, level in enumerate(issue.levels, start=1):
                ET.SubElement(el, "item", index=str(j), value=_level_text(issue, level), cost="0", description="")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def profile_xml(domain: Domain, prefs: PartyPrefs) -> str:
    """The Genius profile of one party of a drawn scenario (its U of a complete contract is our U~)."""
    root = ET.Element("utility_space", type="linear", number_of_issues=str(len(domain.issues)))
    obj = ET.SubElement(root, "objective", index="0", description="", name=domain.name, type="objective",
                        etype="objective")
    for k, (issue, w, sign, pref) in enumerate(zip(domain.issues, prefs.weights, prefs.signs, prefs.preferred),
                                               start=1):
        if issue.kind == "continuous":
            el = ET.SubElement(obj, "issue", index=str(k), etype="real", type="real", vtype="real", name=issue.name)
            span = issue.hi - issue.lo
            slope, offset = (1.0 / span, -issue.lo / span) if sign > 0 else (-1.0 / span, issue.hi / span)
            ET.SubElement(el, "evaluator", ftype="linear", slope=_fmt(slope), offset=_fmt(offset))
            ET.SubElement(el, "range", lowerbound=_fmt(issue.lo), upperbound=_fmt(issue.hi))
        else:
            el = ET.SubElement(obj, "issue", index=str(k), etype="discrete", type="discrete", vtype="discrete",
                               name=issue.name)
            for j, level in enumerate(issue.levels, start=1):
                ET.SubElement(el, "item", index=str(j), value=_level_text(issue, level),
                              evaluation="1" if level == pref else "0")
        ET.SubElement(obj, "weight", index=str(k), value=_fmt(w))
    ET.SubElement(root, "reservation", value=_fmt(prefs.reservation))
    if prefs.discount != 1.0:
        ET.SubElement(root, "discount_factor", value=_fmt(prefs.discount))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def export_scenario(scenario: Scenario, out: str | Path) -> list[Path]:
    """Write ``<domain>_<seed>-domain.xml``, ``-seller.xml`` and ``-buyer.xml`` into ``out``; the paths."""
    if scenario.seller.evaluations:
        raise ValueError(f"scenario {scenario.domain.name!r} is imported; export writes drawn scenarios only")
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{scenario.domain.name}_{scenario.seed}"
    files = {folder / f"{stem}-domain.xml": domain_xml(scenario.domain),
             folder / f"{stem}-seller.xml": profile_xml(scenario.domain, scenario.seller),
             folder / f"{stem}-buyer.xml": profile_xml(scenario.domain, scenario.buyer)}
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
    return list(files)


# --------------------------------------------------------------------------- import


@dataclass(frozen=True)
class GeniusIssue:
    """One issue of a Genius domain file: ``kind`` is discrete, integer or real."""

    name: str
    index: int
    kind: str
    values: tuple[str, ...] = ()
    lo: float = 0.0
    hi: float = 0.0


@dataclass(frozen=True)
class GeniusProfile:
    """One party's profile: weights and evaluations by issue name, reservation and discount."""

    path: Path
    weights: dict[str, float]
    tables: dict[str, dict[str, float]]
    linear: dict[str, tuple[float, float]]  # issue -> (slope, offset)
    reservation: float
    discount: float


def _parse(path: Path) -> ET.Element:
    try:
        return ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise ValidationError(str(path), "<xml>", f"is not well-formed XML ({exc})") from None
    except OSError as exc:
        raise ValidationError(str(path), "<file>", f"cannot be read ({exc})") from None


def _objective(root: ET.Element) -> ET.Element:
    space = root.find("utility_space") if root.tag == "negotiation_template" else root
    if space is None:
        return root
    obj = space.find("objective")
    return obj if obj is not None else space


def _float(el: ET.Element, attr: str, source: str, where: str, default: float | None = None) -> float:
    raw = el.get(attr)
    if raw is None:
        if default is None:
            raise ValidationError(source, f"{where}.{attr}", "is missing")
        return default
    try:
        x = float(raw)
    except ValueError:
        raise ValidationError(source, f"{where}.{attr}", f"must be a number, got {raw!r}") from None
    if not math.isfinite(x):
        raise ValidationError(source, f"{where}.{attr}", f"must be finite, got {raw!r}")
    return x


def _bounds(el: ET.Element, source: str, where: str) -> tuple[float, float]:
    rng = el.find("range")
    src = rng if rng is not None and rng.get("lowerbound") is not None else el
    lo, hi = _float(src, "lowerbound", source, where), _float(src, "upperbound", source, where)
    if not lo < hi:
        raise ValidationError(source, where, f"needs lowerbound < upperbound, got {lo:g} and {hi:g}")
    return lo, hi


def read_domain_xml(path: str | Path) -> list[GeniusIssue]:
    """The issues of a Genius domain file, in index order."""
    path = Path(path)
    root, source = _parse(path), str(path)
    if root.tag != "negotiation_template":
        raise ValidationError(source, "<root>", f"must be <negotiation_template>, got <{root.tag}>")
    issues = []
    for el in _objective(root).iter("issue"):
        name = el.get("name")
        where = f"issue[{name}]"
        if not name:
            raise ValidationError(source, "issue.name", "is missing")
        index = int(_float(el, "index", source, where))
        kind = el.get("type", el.get("etype", "discrete"))
        if kind == "discrete":
            values = tuple(it.get("value", "") for it in el.iter("item"))
            if len(values) < 1 or any(not v.strip() for v in values):
                raise ValidationError(source, f"{where}.item", "needs items with non-empty values")
            if len({v.lower() for v in values}) != len(values):
                raise ValidationError(source, f"{where}.item", f"values must be distinct ignoring case: {values}")
            issues.append(GeniusIssue(name, index, "discrete", values))
        elif kind in ("integer", "real"):
            lo, hi = _bounds(el, source, where)
            if kind == "integer" and (lo != int(lo) or hi != int(hi) or hi - lo + 1 > MAX_INTEGER_LEVELS):
                raise ValidationError(source, where, f"integer bounds must be integers at most "
                                      f"{MAX_INTEGER_LEVELS} apart, got {lo:g} and {hi:g}")
            issues.append(GeniusIssue(name, index, kind, lo=lo, hi=hi))
        else:
            raise ValidationError(source, f"{where}.type", f"must be discrete, integer or real, got {kind!r}")
    if not issues:
        raise ValidationError(source, "issue", "the domain has no issues")
    if len({i.name for i in issues}) != len(issues):
        raise ValidationError(source, "issue.name", "issue names must be distinct")
    return sorted(issues, key=lambda i: i.index)


def read_profile_xml(path: str | Path, issues: list[GeniusIssue]) -> GeniusProfile:
    """One Genius profile, checked against the domain's issues."""
    path = Path(path)
    root, source = _parse(path), str(path)
    if root.tag != "utility_space":
        raise ValidationError(source, "<root>", f"must be <utility_space>, got <{root.tag}>")
    obj = _objective(root)
    by_index = {i.index: i for i in issues}
    weights: dict[str, float] = {}
    for el in obj.findall("weight"):
        index = int(_float(el, "index", source, "weight"))
        if index not in by_index:
            raise ValidationError(source, f"weight[{index}]", "names no issue of the domain")
        weights[by_index[index].name] = _float(el, "value", source, f"weight[{index}]")
    tables: dict[str, dict[str, float]] = {}
    linear: dict[str, tuple[float, float]] = {}
    by_name = {i.name: i for i in issues}
    for el in obj.findall("issue"):
        name = el.get("name", "")
        where = f"issue[{name}]"
        issue = by_name.get(name)
        if issue is None:
            raise ValidationError(source, where, f"is not an issue of the domain ({sorted(by_name)})")
        if issue.kind == "discrete":
            table = {it.get("value", ""): _float(it, "evaluation", source, f"{where}.item[{it.get('value')}]")
                     for it in el.iter("item")}
            missing = [v for v in issue.values if v not in table]
            if missing or set(table) - set(issue.values):
                raise ValidationError(source, f"{where}.item", f"must evaluate exactly the domain's items "
                                      f"{list(issue.values)}; got {sorted(table)}")
            if min(table.values()) < 0:
                raise ValidationError(source, f"{where}.item", "evaluations must be >= 0")
            tables[name] = table
        else:
            ev = el.find("evaluator")
            if ev is None or ev.get("ftype") != "linear":
                raise ValidationError(source, f"{where}.evaluator", "a numeric issue needs "
                                      "<evaluator ftype=\"linear\"> (other shapes are not supported)")
            slope = _float(ev, "slope", source, f"{where}.evaluator", _float(ev, "parameter1", source, where, 1.0))
            offset = _float(ev, "offset", source, f"{where}.evaluator", _float(ev, "parameter0", source, where, 0.0))
            for x in (issue.lo, issue.hi):
                e = offset + slope * x
                if not -EVAL_TOL <= e <= 1 + EVAL_TOL:
                    raise ValidationError(source, f"{where}.evaluator", f"evaluates {x:g} to {e:g}, outside [0, 1]")
            linear[name] = (slope, offset)
    missing = [i.name for i in issues if i.name not in weights or (i.name not in tables and i.name not in linear)]
    if missing:
        raise ValidationError(source, "issue", f"needs a weight and an evaluation for every issue; missing {missing}")
    if abs(sum(weights.values()) - 1.0) > WEIGHT_TOL or min(weights.values()) < 0:
        raise ValidationError(source, "weight", f"weights must be >= 0 and sum to 1, got {sum(weights.values())!r}")
    res = root.find("reservation")
    reservation = 0.0 if res is None else _float(res, "value", source, "reservation")
    disc = root.find("discount_factor")
    discount = 1.0 if disc is None else _float(disc, "value", source, "discount_factor")
    return GeniusProfile(path, weights, tables, linear, reservation, discount if 0.0 < discount <= 1.0 else 1.0)


def _identifier(text: str, taken: set[str]) -> str:
    name = re.sub(r"\W+", "_", text.strip()).strip("_") or "issue"
    name = f"i_{name}" if not name[0].isalpha() else name
    base, n = name, 2
    while name.lower() in taken:
        name, n = f"{base}_{n}", n + 1
    taken.add(name.lower())
    return name


def _role_files(profiles: list[Path], seller: str | None) -> dict[Role, Path]:
    if seller is not None:
        hits = [p for p in profiles if seller in (p.name, p.stem)]
        if len(hits) != 1 or len(profiles) != 2:
            raise ValidationError(str(profiles[0].parent), "seller", f"{seller!r} must name one of the two "
                                  f"profiles {[p.name for p in profiles]}")
        return {"seller": hits[0], "buyer": next(p for p in profiles if p != hits[0])}
    if len(profiles) != 2:
        raise ValidationError(str(profiles[0].parent) if profiles else "<folder>", "profiles",
                              f"needs exactly two profiles, got {[p.name for p in profiles]}")
    named = {r: [p for p in profiles if r in p.stem.lower()] for r in ("seller", "buyer")}
    if len(named["seller"]) == 1 and named["seller"] != named["buyer"]:
        return {"seller": named["seller"][0], "buyer": next(p for p in profiles if p != named["seller"][0])}
    if len(named["buyer"]) == 1:
        return {"buyer": named["buyer"][0], "seller": next(p for p in profiles if p != named["buyer"][0])}
    return {"seller": profiles[0], "buyer": profiles[1]}


def folder_files(folder: str | Path) -> tuple[Path, list[Path]]:
    """(domain file, profile files by name) of a Genius folder, told apart by their root tags."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValidationError(str(folder), "<folder>", "is not a folder")
    domain, profiles = None, []
    for path in sorted(folder.glob("*.xml")):
        tag = _parse(path).tag
        if tag == "negotiation_template":
            if domain is not None:
                raise ValidationError(str(folder), "<folder>", f"holds two domain files: {domain.name}, {path.name}")
            domain = path
        elif tag == "utility_space":
            profiles.append(path)
    if domain is None:
        raise ValidationError(str(folder), "<folder>", "holds no Genius domain file (<negotiation_template>)")
    return domain, profiles


def _split(seller: tuple[float, ...], buyer: tuple[float, ...]) -> str:
    """``distributive`` when the parties rank the levels in exactly opposite orders, else ``integrative``."""
    pairs = [(i, j) for i in range(len(seller)) for j in range(i + 1, len(seller))]
    opposite = bool(pairs) and all((seller[i] - seller[j]) * (buyer[i] - buyer[j]) < 0 for i, j in pairs)
    return "distributive" if opposite else "integrative"


def _evaluations(issues: list[GeniusIssue], profile: GeniusProfile) -> list[tuple[float, ...]]:
    """Per issue, the party's evaluations: per level over the largest (discrete), per integer, or at both ends."""
    evals: list[tuple[float, ...]] = []
    for gi in issues:
        if gi.kind == "discrete":
            table = profile.tables[gi.name]
            top = max(table.values())
            evals.append(tuple(table[v] / top if top > 0 else 0.0 for v in gi.values))
        elif gi.kind == "integer":
            slope, offset = profile.linear[gi.name]
            evals.append(tuple(offset + slope * x for x in range(int(gi.lo), int(gi.hi) + 1)))
        else:
            slope, offset = profile.linear[gi.name]
            evals.append((offset + slope * gi.lo, offset + slope * gi.hi))
    return evals


def _prefs(role: Role, issues: tuple[Issue, ...], gis: list[GeniusIssue], profile: GeniusProfile,
           evals: list[tuple[float, ...]]) -> PartyPrefs:
    signs, preferred = [], []
    for issue, ev in zip(issues, evals):
        if issue.kind == "continuous":
            signs.append(1 if ev[1] >= ev[0] else -1)
            preferred.append(None)
        else:
            signs.append(0)
            preferred.append(issue.levels[max(range(len(ev)), key=ev.__getitem__)])
    weights = tuple(profile.weights[g.name] for g in gis)
    return PartyPrefs(role, weights, tuple(signs), tuple(preferred), profile.reservation, tuple(evals),
                      profile.discount)


def read_genius_folder(folder: str | Path, seller: str | None = None, name: str | None = None) -> Scenario:
    """The fixed scenario of a Genius folder (one domain file, two profiles; roles as the module says)."""
    folder = Path(folder)
    domain_file, profiles = folder_files(folder)
    gis = read_domain_xml(domain_file)
    files = _role_files(profiles, seller)
    parsed = {r: read_profile_xml(p, gis) for r, p in files.items()}
    evals = {r: _evaluations(gis, parsed[r]) for r in ("seller", "buyer")}
    taken: set[str] = set()
    issues = []
    for k, gi in enumerate(gis):
        ident = _identifier(gi.name, taken)
        desc = gi.name if ident != gi.name else ""
        if gi.kind == "real":
            issues.append(Issue(ident, "continuous", desc, "", gi.lo, gi.hi,
                                1 if evals["seller"][k][1] >= evals["seller"][k][0] else -1))
        else:
            levels = gi.values if gi.kind == "discrete" else tuple(str(x) for x in range(int(gi.lo), int(gi.hi) + 1))
            issues.append(Issue(ident, "table", desc, levels=levels,
                                split=_split(evals["seller"][k], evals["buyer"][k])))
    dom_name = name or _identifier(folder.resolve().name, set())
    briefs = {r: (f"You negotiate as the {r} in the Genius scenario '{folder.name}' "
                  f"(profile {files[r].name}). Agree on every term of the contract.") for r in ("seller", "buyer")}
    domain = Domain(dom_name, f"Genius scenario {folder.name}", tuple(issues), briefs, False, True)
    return Scenario(domain, 0, _prefs("seller", domain.issues, gis, parsed["seller"], evals["seller"]),
                    _prefs("buyer", domain.issues, gis, parsed["buyer"], evals["buyer"]))


__all__ = ["domain_xml", "export_scenario", "folder_files", "profile_xml", "read_domain_xml",
           "read_genius_folder", "read_profile_xml"]
