"""Every number a spec gives is bounded at load (``teton.spec.fields``): a boolean, NaN, an
infinity or a value outside the field's range is a one-line error naming the field, the value and
the range, never a traceback nor absurd figures."""

import pytest
from cli_checks import one_line_error, write_spec

from teton.errors import SpecError
from teton.spec import load_spec
from teton.spec.fields import MAX_GPUS, MAX_SEQ_LEN

EXAMPLE = "examples/llama3-405b-16k.yaml"


@pytest.mark.parametrize("item, needle", [
    ("job.seq_len=100000000000000000000000000", f"job.seq_len = 100000000000000000000000000: must be an integer "
                                                f"in 1..{MAX_SEQ_LEN:,}"),
    ("job.tp=" + "9" * 50, f"job.tp = {'9' * 50}: must be an integer in 1..{MAX_GPUS:,}"),
    ("job.seq_len=.nan", "job.seq_len = nan: must be an integer"),
    ("model.hidden=1e300", "model.hidden = 1e+300: must be an integer in 1..1,048,576"),
    ("cluster.hosts=1e30", "cluster.hosts = 1e+30: must be an integer in 1..10,000,000"),
    ("reliability.rate_scale=.inf", "reliability.rate_scale = inf: must be a finite number in [0, 1e+18]"),
    ("reliability.rates_per_hour.faulty_gpu=1e300", "reliability.rates_per_hour.faulty_gpu = 1e+300"),
    ("storage.ssd_read_gbytes_s=1e-300", "storage.ssd_read_gbytes_s = 1e-300: must be a finite number in [1e-12"),
    ("storage.servers=0.5", "storage.servers = 0.5: must be an integer"),
    ("storage.checkpoint.interval_s=-0.0", "storage.checkpoint.interval_s = -0.0"),
    ("network.qps_per_connection=100000", "network.qps_per_connection = 100000: must be an integer in 1..1,024"),
    ("software.cpu_offload_layers=1e9", "software.cpu_offload_layers = 1000000000: must be an integer"),
    ("plan.usd_per_tb_month=.inf", "plan.usd_per_tb_month = inf"),
])
def test_a_number_out_of_range_is_one_line_naming_field_value_and_range(item, needle):
    with pytest.raises(SpecError) as err:
        load_spec(EXAMPLE, [item])
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("item, field", [
    ("job.gpus=true", "job.gpus"), ("job.zero=true", "job.zero"), ("model.layers=false", "model.layers"),
    ("reliability.days=true", "reliability.days"), ("storage.servers=true", "storage.servers"),
    # the defect: plan.storage_servers=true read as 1 storage server
    ("plan.storage_servers=true", "plan.storage_servers"), ("plan.gpus=true", "plan.gpus"),
])
def test_a_boolean_is_no_number_anywhere(item, field):
    with pytest.raises(SpecError, match=f"{field} = (True|False): must be .*not a boolean"):
        load_spec(EXAMPLE, [item])


def test_an_integer_past_the_conversion_limit_is_one_short_line(cli):
    """5,000 digits broke int -> str (ValueError) in the --set reader and in the error itself."""
    code, _, err = cli("ops", EXAMPLE, "--set", "job.tp=" + "7" * 5000)
    line = one_line_error(code, err, "job.tp")
    assert len(line) < 1000


def test_a_spec_file_with_a_huge_integer_is_one_line(cli, tmp_path):
    path = write_spec(tmp_path, "cluster: dgx-h100-superpod\nmodel: llama3-8b\njob: {gpus: " + "8" * 5000 + "}\n")
    code, _, err = cli("run", path)
    one_line_error(code, err, "too large")


def test_ops_with_a_huge_seq_len_is_refused_not_printed(cli):
    """It printed 10^44 ms per layer (and overflowed past 10^300) before the field was bounded."""
    code, out, err = cli("ops", EXAMPLE, "--set", "job.seq_len=100000000000000000000000000")
    one_line_error(code, err, "job.seq_len")
    assert out == ""


def test_the_largest_values_in_range_run_without_error(cli, tmp_path):
    """The bounds are finite for the simulation's sake: at them the step still simulates."""
    path = write_spec(tmp_path, "cluster: dgx-h100-superpod\n"
                      "model: {base: llama3-8b, hidden: 1048576, ffn_hidden: 1048576, heads: 8, kv_heads: 8, "
                      "vocab: 16777216, max_seq_len: 16777216}\n"
                      "job: {gpus: 8, tp: 8, seq_len: 16777216, micro_batch: 1048576, global_batch: 1048576}\n")
    code, out, err = cli("ops", path)
    assert code == 0, err


@pytest.mark.parametrize("text, needle", [
    ("1:10000000:1", "at most 1,000 counts"),  # 1:100000000:1 built 10^8 counts in 11 s before
    ("1:" + "9" * 50, "each count at most 10,000,000"),  # geometric points of float-rounded 10^50
    ("99999999999,8", "each count at most 10,000,000"),
    ("1:" + "9" * 5000 + ":1", "each count at most"),
])
def test_plan_counts_are_bounded(text, needle):
    from teton.spec.plan import parse_counts

    with pytest.raises(SpecError, match=needle):
        parse_counts(text, "gpus")
    assert parse_counts("64:1024", "gpus", 8) == (64, 128, 256, 512, 1024)
