"""teton ops: the rows of every block as JSON, the table, and a bad --block as a one-line error."""

import json


def test_cli_ops_json_and_errors(cli, example_spec):
    code, out, _ = cli("ops", example_spec, "--block", "all", "--json", "--set", "job.tp_overlap=full")
    assert code == 0
    d = json.loads(out)
    assert {r["block"] for r in d["rows"]} == {"embedding", "layer", "head"}
    hidden = [r for r in d["rows"] if r["bound"].startswith("alongside")]
    assert hidden and all(r["exposed_s"] < r["time_s"] for r in hidden)
    code, out, _ = cli("ops", example_spec)
    assert code == 0 and "mlp_up" in out
    code, _, err = cli("ops", example_spec, "--block", "mlp")
    assert code == 2 and "--block" in err and len(err.strip().splitlines()) == 1
