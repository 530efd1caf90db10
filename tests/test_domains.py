"""Domain files: the nine shipped schemas and the validator's error messages."""

from __future__ import annotations

import pytest
import yaml

from negolib.core.errors import ValidationError
from negolib.games.multi_issue.domains import DOMAIN_DIR, get_domain, load_domain, load_domains, parse_domain


def test_nine_domains_eight_training_one_held_out():
    doms = load_domains()
    assert len(doms) == 9
    assert [d.name for d in doms.values() if d.held_out] == ["car"]
    for name in ("acquisition", "job_offer", "partnership_dissolution", "media_rights"):
        assert name in doms


@pytest.mark.parametrize("name", sorted(p.stem for p in DOMAIN_DIR.glob("*.yaml")))
def test_each_domain_has_7_to_10_issues_and_3_to_5_distributive(name):
    d = get_domain(name)
    assert 7 <= len(d.issues) <= 10
    assert 3 <= sum(i.distributive for i in d.issues) <= 5
    assert d.briefs["seller"] and d.briefs["buyer"]


def test_car_has_ten_issues_with_the_papers_terms():
    car = get_domain("car")
    assert len(car.issues) == 10
    for name in ("price", "model", "interior", "service", "accessories", "delivery"):
        assert name in car.issue_names
    assert car.issue("price").unit == "$k" and car.issue("model").levels[0] == "Sedan"
    assert car.issue("accessories").kind == "binary"


def _base() -> dict:
    return yaml.safe_load((DOMAIN_DIR / "acquisition.yaml").read_text())


@pytest.mark.parametrize("mutate, field, words", [
    (lambda d: d.update(colour="red"), "<top>", "unknown keys"),
    (lambda d: d["issues"][0].update(kind="ordinal"), "issues[0] (price).kind", "must be one of"),
    (lambda d: d["issues"][0].update(range=[9, 1]), "issues[0] (price).range", "lo < hi"),
    (lambda d: d["issues"][0].update(seller_prefers="up"), "issues[0] (price).seller_prefers", "'high' or 'low'"),
    (lambda d: d["issues"][4].update(levels=["keep"]), "issues[4] (brand).levels", ">= 2"),
    (lambda d: d["issues"].__setitem__(slice(4, None), []), "issues", "7-10 issues"),
    (lambda d: d["issues"][1].update(name="price"), "issues", "duplicate"),
    (lambda d: d.update(briefs={"seller": "x"}), "briefs", "'seller' and 'buyer'"),
    (lambda d: d["issues"][5].update(range=[1, 2]), "issues[5] (headquarters)", "unknown keys"),
    # strict at load (issue 13 §4): names unique ignoring case, finite ranges with lo < hi
    (lambda d: d["issues"][1].update(name="Price"), "issues", "ignoring case"),
    (lambda d: d["issues"][0].update(range=[0, float("inf")]), "issues[0] (price).range", "finite"),
    (lambda d: d["issues"][0].update(range=[float("-inf"), 10]), "issues[0] (price).range", "finite"),
    (lambda d: d["issues"][0].update(range=[float("nan"), 10]), "issues[0] (price).range", "finite"),
    (lambda d: d["issues"][0].update(range=[5, 5]), "issues[0] (price).range", "lo < hi"),
])
def test_validation_errors_name_field_and_allowed_values(mutate, field, words):
    data = _base()
    mutate(data)
    with pytest.raises(ValidationError) as info:
        parse_domain(data, "bad.yaml")
    assert info.value.field == field and words in str(info.value) and "bad.yaml" in str(info.value)


def test_load_domain_names_the_file(tmp_path):
    p = tmp_path / "mine.yaml"
    p.write_text("name: other\n")
    with pytest.raises(ValidationError, match="mine.yaml"):
        load_domain(p)
    p.write_text("name: [unclosed\n")
    with pytest.raises(ValidationError, match="not valid YAML"):
        load_domain(p)


def test_users_can_add_a_domain_folder(tmp_path):
    data = _base()
    data["name"] = "my_domain"
    (tmp_path / "my_domain.yaml").write_text(yaml.safe_dump(data))
    assert list(load_domains(tmp_path)) == ["my_domain"]
    with pytest.raises(ValidationError, match="unknown domain"):
        get_domain("nope")


# -- strict at load (issue 13 §4): more cases are in the parametrized test above ----------------------

def test_infinite_range_in_a_yaml_file_is_rejected(tmp_path):
    text = (DOMAIN_DIR / "acquisition.yaml").read_text()
    name = "acquisition"
    line = next(ln for ln in text.splitlines() if "range: [" in ln)
    lo_hi = line[line.index("range: [") + 8: line.index("]", line.index("range: ["))]
    p = tmp_path / f"{name}.yaml"
    p.write_text(text.replace(f"range: [{lo_hi}]", "range: [0, .inf]", 1))
    with pytest.raises(ValidationError, match="finite"):
        load_domain(p)


def test_duplicate_key_in_a_domain_file_names_it_and_its_lines(tmp_path):
    text = (DOMAIN_DIR / "acquisition.yaml").read_text()
    assert text.count("held_out: false\n") == 1
    p = tmp_path / "acquisition.yaml"
    p.write_text(text.replace("held_out: false\n", "held_out: false\nheld_out: true\n"))
    with pytest.raises(ValidationError) as info:
        load_domain(p)
    assert info.value.field == "held_out" and "line 3 and line 4" in str(info.value)
    first = next(ln for ln in text.splitlines() if ln.startswith("  - {name:"))
    p.write_text(text.replace(first, first.replace("{name:", "{kind: binary, name:")))
    assert "kind: binary, name:" in p.read_text()
    with pytest.raises(ValidationError, match="key given twice") as info:
        load_domain(p)
    assert info.value.field == "issues[0].kind"


def test_every_shipped_domain_loads_strictly():
    from negolib.params import load_yaml

    for f in sorted(DOMAIN_DIR.glob("*.yaml")):
        assert load_domain(f).name == f.stem and isinstance(load_yaml(f), dict)
