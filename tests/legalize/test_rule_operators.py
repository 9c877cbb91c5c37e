"""Rules declare the operators they check; the operator enum's traits and codes."""
from __future__ import annotations

import json

import numpy as np

from onnx2ai8x.devices import MAX78000
from onnx2ai8x.legalize import RULES, Rule, check, diagnose
from onnx2ai8x.network import Op
from tests.legalize.builders import conv1d, conv2d, linear, network, passthrough


def test_a_rule_sees_only_the_layers_of_its_operators():
    seen = []

    def record(layer, net, device):
        """Records the layers it is given (vendor tool: none)."""
        seen.append(layer.name)

    rule = Rule("record", record, applies_to=frozenset({Op.CONV1D, Op.LINEAR}))
    net = network(conv2d("a", 4, 4, 8), conv1d("b", 4, 4, 64), linear("c", 4 * 64, 10))
    assert list(check(net, MAX78000, (rule,))) == []
    assert seen == ["b", "c"]


def test_a_rule_without_operators_sees_every_layer():
    seen = []
    rule = Rule("record", lambda layer, net, dev: seen.append(layer.name))
    net = network(conv2d("a", 4, 4, 8), passthrough("p", 4, 8))
    list(check(net, MAX78000, (rule,)))
    assert seen == ["a", "p"]


def test_an_unknown_operator_code_gets_only_the_rules_for_every_layer():
    lay = conv2d("odd", weights=None)
    odd = type(lay)(**{**lay.__dict__, "operator": 9})
    assert odd.operator == 9 and not isinstance(odd.operator, Op)
    codes = {d.code for d in diagnose(network(odd), MAX78000)}
    assert "limit.operator-kind" in codes
    narrow = {f"limit.{r.name}" for r in RULES if r.applies_to is not None}
    assert not codes & narrow


def test_layer_turns_vendor_codes_into_operators():
    for code in range(5):
        lay = conv2d("x")
        made = type(lay)(**{**lay.__dict__, "operator": np.int64(code)})
        assert isinstance(made.operator, Op) and made.operator == code


def test_operator_codes_serialize_as_the_vendors_ints():
    # The vendor's resolved configuration numbers the operators 0 (none) .. 4 (linear).
    assert json.loads(json.dumps([op for op in Op])) == [0, 1, 2, 3, 4]
    assert f"{Op.CONVTRANSPOSE2D}" == "3"


def test_traits_partition_the_operators():
    weighted = {op for op in Op if op.has_weights}
    assert weighted == set(Op) - {op for op in Op if op.passthrough}
    assert {op for op in Op if op.convolution} == weighted - {Op.LINEAR}
    assert [op for op in Op if op.one_d] == [Op.CONV1D]
    assert [op for op in Op if op.transposed] == [Op.CONVTRANSPOSE2D]
    assert len({op.word for op in Op}) == len(Op)
