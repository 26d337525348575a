# Copyright: (c) 2026, sparkfold developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A role's variables are documented in one place, its meta/argument_specs.yml (`ansible-doc -t role`): every
variable of defaults/main.yml is an option there, and a plain value (no Jinja) is the option's `default:` too, so
the rendered documentation never states another value than the one the role uses. A value computed by Jinja is
described in words (`recipe_spec.engine.commit`), not compared."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROLES = Path(__file__).resolve().parents[3] / "roles"
DEFAULTS = sorted(ROLES.glob("*/defaults/main.yml"))

# Plain values the argument spec states in words instead (a long regex); each names its owner's reason.
IN_WORDS = {
    "engine_service_earlyoom_avoid": "a regex of some 30 process names; the spec says which kinds",
}


def _has_jinja(value):
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, dict):
        return any(_has_jinja(k) or _has_jinja(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_jinja(v) for v in value)
    return False


def _options(role):
    spec = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    options = {}
    for entry_point in spec.values():
        options.update(entry_point.get("options") or {})
    return options


@pytest.mark.parametrize("defaults", DEFAULTS, ids=lambda path: path.parts[-3])
def test_every_default_is_documented_with_its_value(defaults):
    role = defaults.parts[-3]
    values = yaml.safe_load(defaults.read_text()) or {}
    options = _options(role)
    missing = sorted(name for name in values if name not in options)
    assert missing == [], f"{role}: variables missing from the argument spec"
    differ = [
        f"{name}: defaults/main.yml {value!r}, argument spec {options[name].get('default', '(none)')!r}"
        for name, value in values.items()
        if not _has_jinja(value) and name not in IN_WORDS and options[name].get("default") != value
    ]
    assert differ == []


def test_in_words_names_plain_values():
    """An entry of IN_WORDS that no longer names a plain default with another value in its spec goes."""
    stale = []
    for name in IN_WORDS:
        role = next(path.parts[-3] for path in DEFAULTS if name in (yaml.safe_load(path.read_text()) or {}))
        value = yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())[name]
        if _has_jinja(value) or _options(role)[name].get("default") == value:
            stale.append(name)
    assert stale == []
