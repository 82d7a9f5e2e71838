"""Auto ids: parsing and naming auto/subscription, auto/thrifty and composites."""

from __future__ import annotations

import pytest

from ladder.core import Grouping, NotAnAutoId, UnknownTier, parse_auto_id


@pytest.mark.parametrize(
    ("value", "grouping", "category", "fail_mode"),
    [
        pytest.param("auto/subscription", Grouping.SUBSCRIPTION, None, "closed", id="flat-sub"),
        pytest.param("auto/thrifty", Grouping.THRIFTY, None, "open", id="flat-thrifty"),
        pytest.param("auto/coding:thrifty", Grouping.THRIFTY, "coding", "open", id="category"),
        pytest.param(
            "auto/reasoning:subscription",
            Grouping.SUBSCRIPTION,
            "reasoning",
            "closed",
            id="category-subscription",
        ),
        pytest.param("auto/v1.2_x-y:thrifty", Grouping.THRIFTY, "v1.2_x-y", "open", id="charset"),
    ],
)
def test_parse_auto_id_accepts_flat_and_category_ids(
    value: str, grouping: Grouping, category: str | None, fail_mode: str
) -> None:
    parsed = parse_auto_id(value)

    assert (parsed.grouping, parsed.category, parsed.fail_mode) == (grouping, category, fail_mode)
    assert parsed.auto_id == value
    assert str(parsed) == value


@pytest.mark.parametrize(
    ("value", "tier"),
    [
        pytest.param("auto/coding:premium", "premium", id="category-premium"),
        pytest.param("auto/coding", "coding", id="flat-non-tier"),
        pytest.param("auto/Thrifty", "Thrifty", id="case-sensitive"),
        pytest.param("auto/coding:", "", id="empty-tier"),
    ],
)
def test_parse_auto_id_refuses_unknown_tiers_naming_the_known_ones(value: str, tier: str) -> None:
    with pytest.raises(UnknownTier) as raised:
        parse_auto_id(value)

    assert (raised.value.tier, raised.value.known) == (tier, ("subscription", "thrifty"))
    assert "known tiers are subscription, thrifty" in str(raised.value)
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("gpt-4o", id="plain-model"),
        pytest.param("auto/", id="nothing-after-prefix"),
        pytest.param("Auto/thrifty", id="prefix-case"),
        pytest.param(" auto/thrifty", id="leading-space"),
        pytest.param("auto/:thrifty", id="empty-category"),
        pytest.param("auto/co ding:thrifty", id="space-in-category"),
        pytest.param("auto/a/b:thrifty", id="slash-in-category"),
        pytest.param(f"auto/{'c' * 65}:thrifty", id="category-too-long"),
    ],
)
def test_parse_auto_id_refuses_what_is_not_an_auto_id(value: str) -> None:
    with pytest.raises(NotAnAutoId) as raised:
        parse_auto_id(value)

    assert isinstance(raised.value, ValueError)
    assert repr(value) in str(raised.value)
