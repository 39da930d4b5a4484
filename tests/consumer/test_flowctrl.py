"""Flow-control rule parsing and pacing (docs/PROTOCOL.md §5.2.8, vector flow_control_rule_example)."""

from __future__ import annotations

import pytest
from _data import vector

from tubemq.consumer.flowctrl import FlowControl, parse_rules
from tubemq.protocol import master_pb

EXAMPLE = (
    '[{"type":0,"rule":[{"start":"08:00","end":"17:59","dltInM":1024,"limitInM":20,"freqInMs":1000}]},'
    '{"type":1,"rule":[{"zeroCnt":3,"freqInMs":300},{"zeroCnt":8,"freqInMs":1000}]},'
    '{"type":3,"rule":[{"normFreqInMs":0,"filterFreqInMs":100,"minDataFilterFreqInMs":400}]}]'
)


def test_parse_example_rules() -> None:
    assert vector("flow_control_rule_example")["inputs"]["json"] == EXAMPLE
    rules = parse_rules(EXAMPLE)
    assert rules.empty_rules == ((3, 300), (8, 1000))
    assert rules.filter_rule == (0, 100, 400)
    (limit,) = rules.data_limits
    assert (limit.start_min, limit.end_min, limit.freq_ms) == (480, 1079, 1000)
    assert limit.dlt_bytes == 1024 * 1024 * 1024 and limit.limit_bytes_per_min == 20 * 1024 * 1024


@pytest.mark.parametrize("text", [None, "", " ", "[]", "not json", '{"type": 1}', '[{"type": 1, "rule": [{}]}]'])
def test_no_or_bad_rules_mean_defaults(text: str | None) -> None:
    rules = parse_rules(text)
    assert not rules.empty_rules and rules.filter_rule is None and not rules.data_limits


def test_update_and_delays() -> None:
    fc = FlowControl(msg_not_found_wait_ms=400, filter_wait_ms=50)
    assert fc.empty_delay(1) == 0.4
    assert fc.data_delay(filtered=True, require_slow=True, data_dlt=0, nbytes=0) == 0.05
    assert fc.data_delay(filtered=False, require_slow=False, data_dlt=0, nbytes=10) == 0.0
    rsp = master_pb.HeartResponseM2C(success=True, errCode=200, errMsg="OK!", defFlowCheckId=-2,
                                     defFlowControlInfo=" ", groupFlowCheckId=7, groupFlowControlInfo=EXAMPLE,
                                     qryPriorityId=301)
    fc.update(rsp)
    assert (fc.def_id, fc.group_id, fc.qry_priority_id) == (-2, 7, 301)
    assert fc.empty_delay(1) == 0.4  # below the first zeroCnt: the default wait
    assert fc.empty_delay(3) == 0.3 and fc.empty_delay(20) == 1.0
    assert fc.data_delay(filtered=True, require_slow=True, data_dlt=0, nbytes=0) == 0.4
    assert fc.data_delay(filtered=True, require_slow=False, data_dlt=0, nbytes=0) == 0.1
    # same id again: rules are not re-parsed; id -2: rules dropped
    fc.update(master_pb.HeartResponseM2C(success=True, errCode=200, errMsg="", groupFlowCheckId=-2,
                                         groupFlowControlInfo=" "))
    assert fc.group_id == -2 and fc.empty_delay(20) == 0.4
