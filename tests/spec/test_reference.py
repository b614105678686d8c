"""docs/spec.md lists every field of every spec section, as the models define them."""
from pathlib import Path

from teton.spec.reference import SECTIONS, markdown

ROOT = Path(__file__).resolve().parents[2]


def test_docs_spec_is_current():
    text = (ROOT / "docs" / "spec.md").read_text()
    assert markdown() in text, "docs/spec.md is stale: regenerate it from teton.spec.reference.markdown()"


def test_every_field_of_every_section_is_listed():
    page = markdown()
    for name, cls, _ in SECTIONS:
        section = page.split(f"### `{name}`", 1)[1].split("### ", 1)[0]
        for field in cls.model_fields:
            assert f"| `{field}` |" in section, f"{name}.{field} missing from the reference"


def test_a_field_meaning_comes_from_its_source_comment():
    # JobSpec.global_batch carries "# sequences per step" on its line
    row = next(r for r in markdown().split("### `job`")[1].splitlines() if r.startswith("| `global_batch` |"))
    assert row.endswith("| sequences per step |")


def test_every_field_has_a_meaning_and_no_meaning_is_a_code_banner():
    """docs/spec.md showed comment banners ("--- cost ---") as meanings and left 36 fields blank."""
    section = None
    for row in markdown().splitlines():
        if row.startswith("### "):
            section = row
        if row.startswith("| `"):
            meaning = row.rstrip().rstrip("|").split("|")[-1].strip()
            assert meaning, f"{section} {row.split('|')[1].strip()}: no meaning"
            assert "---" not in meaning, f"{section}: {meaning}"
