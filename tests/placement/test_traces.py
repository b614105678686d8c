"""Trace readers: our CSV, Philly cluster_job_log JSON, malformed lines, the generator."""

from pathlib import Path

import pytest

import teton.placement.traces as tr
from teton.errors import SpecError

DATA = Path(tr.__file__).resolve().parents[1] / "data" / "traces"

GOOD = """# a comment
job_id,arrival_s,gpus,duration_s,tokens,model,tp,pp
a,0,8,3600,,llama3-8b,,
b,10,1024,,2e9,llama3-70b,8,4
"""


def test_ours_reads_good_rows():
    t = tr.parse_ours(GOOD)
    assert [j.job_id for j in t.jobs] == ["a", "b"]
    assert t.jobs[1].tokens == 2e9 and t.jobs[1].tp == 8 and t.jobs[1].pp == 4
    assert t.issues == ()


BAD = GOOD + """c,20,x,100,,,,
d,30,8,,,,,
e,40,8,100,5,,,
f,50,8,100,,llama9,,
a,60,8,100,,,,
g,70,8,100
h,-1,8,100,,,,
i,80,12,100,,,8,
"""


def test_malformed_lines_reported_with_line_numbers():
    t = tr.parse_ours(BAD, "t.csv")
    assert [j.job_id for j in t.jobs] == ["a", "b"]
    lines = {i.line: i.message for i in t.issues}
    assert sorted(lines) == [5, 6, 7, 8, 9, 10, 11, 12]
    assert "gpus" in lines[5] and "not a number" in lines[5]
    assert "exactly one" in lines[6] and "exactly one" in lines[7]
    assert "llama" in lines[8]
    assert "duplicate" in lines[9]
    assert "fields" in lines[10]
    assert "arrival_s" in lines[11]
    assert "multiple of tp*pp" in lines[12]


def test_strict_rejects_naming_the_line():
    with pytest.raises(SpecError, match="trace line = 5"):
        tr.parse_ours(BAD, "t.csv", strict=True)


def test_bad_header_is_an_error():
    with pytest.raises(SpecError, match="gpus"):
        tr.parse_ours("job_id,arrival_s\na,0\n")
    with pytest.raises(SpecError, match="did you mean"):
        tr.parse_ours("job_id,arrival_s,gpus,duraton_s\n")


PHILLY = """[
{"status": "Pass", "vc": "v", "jobid": "app_1", "submitted_time": "2017-10-03 08:00:00", "user": "u",
 "attempts": [{"start_time": "2017-10-03 08:01:00", "end_time": "2017-10-03 09:01:00",
               "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}, {"ip": "m2", "gpus": ["gpu0", "gpu1"]}]},
              {"start_time": "2017-10-03 09:10:00", "end_time": "2017-10-03 09:20:00",
               "detail": [{"ip": "m3", "gpus": ["gpu0", "gpu1", "gpu2", "gpu3"]}]}]},
{"status": "Killed", "vc": "v", "jobid": "app_2", "submitted_time": "2017-10-03 08:05:00", "user": "u", "attempts": []},
{"status": "Running", "vc": "v", "jobid": "app_3", "submitted_time": "2017-10-03 08:06:00", "user": "u",
 "attempts": [{"start_time": "2017-10-03 08:07:00", "end_time": null, "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}]},
{"status": "Pass", "vc": "v", "jobid": "app_4", "submitted_time": "2017-10-03 07:59:00", "user": "u",
 "attempts": [{"start_time": "2017-10-03 08:00:00", "end_time": "2017-10-03 08:00:30", "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}]},
{"status": "Pass", "jobid": oops},
{"status": "Pass", "vc": "v", "jobid": "app_6", "submitted_time": "03/10/2017", "user": "u", "attempts": []}
]
"""


def test_philly_reader():
    t = tr.parse_philly(PHILLY, "log.json")
    assert [j.job_id for j in t.jobs] == ["app_1", "app_4"]
    a1, a4 = t.jobs
    assert a1.gpus == 4 and a1.duration_s == 3600 + 600 and a1.arrival_s == 60.0
    assert a4.arrival_s == 0.0 and a4.duration_s == 30
    lines = {i.line: i.message for i in t.issues}
    assert sorted(lines) == [7, 8, 12, 13]
    assert "never ran" in lines[7]
    assert "end_time" in lines[8]
    assert "invalid JSON" in lines[12]
    assert "submitted_time" in lines[13]
    with pytest.raises(SpecError, match="trace line = 7"):
        tr.parse_philly(PHILLY, strict=True)


def test_bundled_samples_read_clean():
    ours = tr.read_trace(DATA / "sample.csv")
    assert len(ours.jobs) == 63 and ours.issues == ()
    philly = tr.read_trace(DATA / "philly-format-synthetic-sample.json")
    assert philly.format == "philly" and len(philly.jobs) == 40 and philly.issues == ()
    assert "synthetic sample" in (DATA / "README.md").read_text()


def test_synthetic_is_seeded_and_round_trips():
    a = tr.synthetic_trace(500, 24576, seed=3)
    assert a == tr.synthetic_trace(500, 24576, seed=3)
    assert a.jobs != tr.synthetic_trace(500, 24576, seed=4).jobs
    assert all(j.gpus <= 8192 for j in a.jobs)
    back = tr.parse_ours(tr.write_ours(a))
    assert back.issues == () and len(back.jobs) == 500
    assert [(j.gpus, j.duration_s) for j in back.jobs] == [(j.gpus, j.duration_s) for j in a.jobs]
    small = tr.synthetic_trace(200, 64, seed=1)
    assert max(j.gpus for j in small.jobs) <= 64


def test_read_trace_errors(tmp_path):
    with pytest.raises(SpecError, match="no such file"):
        tr.read_trace(tmp_path / "nope.csv")
    p = tmp_path / "t.csv"
    p.write_text(GOOD)
    with pytest.raises(SpecError, match="format"):
        tr.read_trace(p, "helios")


ALIBABA = """j1,worker,2,Terminated,100.0,400.0,600.0,29.3,100,V100
j1,ps,1,Terminated,100.0,400.0,800.0,40.0,,
j2,tensorflow,1,Terminated,50.0,80.0,400.0,15.0,50,T4
j3,worker,x,Terminated,60.0,90.0,600.0,29.3,100,V100
j4,worker,1,Terminated,60.0
j5,worker,1,Failed,90.0,70.0,600.0,29.3,100,V100
j6,ps,1,Terminated,10.0,20.0,800.0,40.0,,
j1,evaluator,1,Terminated,120.0,500.0,200.0,8.0,100,T4
"""


def test_alibaba_task_table_reader():
    t = tr.parse_alibaba(ALIBABA, "pai_task_table.csv")
    assert [(j.job_id, j.gpus, j.arrival_s, j.duration_s) for j in t.jobs] == [
        ("j2", 1, 0.0, 30.0),  # half a GPU rounds up to one
        ("j1", 3, 50.0, 400.0),  # 2 workers x 1 GPU + an evaluator; the ps asks for none
    ]
    lines = {i.line: i.message for i in t.issues}
    assert sorted(lines) == [4, 5, 6, 7]
    assert "inst_num" in lines[4] and "fields" in lines[5] and "before start_time" in lines[6]
    assert "no task asks for a GPU" in lines[7]
    with pytest.raises(SpecError, match="trace line = 4"):
        tr.parse_alibaba(ALIBABA, strict=True)


def test_bundled_alibaba_sample():
    t = tr.read_trace(DATA / "pai_task_table-synthetic-sample.csv")
    assert t.format == "alibaba" and len(t.jobs) == 36 and t.issues == ()
    assert "SYNTHETIC SAMPLE" in (DATA / "pai_task_table-synthetic-sample.csv").read_text().splitlines()[0]


@pytest.mark.parametrize("row, message", [
    ("a,1e300,8,100", "arrival_s = '1e300': must be a number in [0, 1e+11]"),
    ("a,0,8,1e300", "duration_s = '1e300': must be a number in (0, 1e+11]"),
    ("a,0,100000000000,100", "gpus = '100000000000': must be a number in (0, 1e+07]"),
    ("a,0,8,100,1e400", "tokens = '1e400'"),
    ("a,0,nan,100", "gpus = 'nan'"),
    ("a,0,8.5,100", "gpus = '8.5': not an integer"),
])
def test_a_cell_out_of_range_is_a_bad_line(row, message):
    """A huge but finite cell was read and overflowed the schedule; each column is bounded now."""
    t = tr.parse_ours("job_id,arrival_s,gpus,duration_s" + (",tokens\n" if row.count(",") == 4 else "\n") + row + "\n")
    assert t.jobs == () and message in str(t.issues[0])


def test_alibaba_cells_are_bounded():
    t = tr.parse_alibaba("j,t,1e300,Terminated,0,10,,,100,V100\n")
    assert t.jobs == () and "inst_num = '1e300'" in str(t.issues[0])
