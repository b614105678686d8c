"""teton import: one realistic 70B job config per framework, in that project's own format
(tests/data/frameworks/), becomes a spec that loads and runs, with its degrees, batch, precision
and stack carried over, every key it does not map named, and bad input a one-line error."""

import re
from pathlib import Path

import pytest
import yaml

import teton
from teton.errors import SpecError
from teton.spec.frameworks import detect, import_config
from teton.spec.frameworks.shell import parse_flags, read_command
from teton.validation.memory_saving import fits_within_tolerance

DATA = Path(__file__).resolve().parents[1] / "data" / "frameworks"
MEGATRON = DATA / "megatron-llama3-70b.sh"
NEMO2 = DATA / "nemo2-llama3-70b.yaml"
NEMO1 = DATA / "nemo1-llama3-70b.yaml"
TORCHTITAN = DATA / "torchtitan-llama3-70b.toml"
MAXTEXT = DATA / "maxtext-llama3-70b.yaml"

# (config, framework, job fields, software fields) the import must carry over
EXPECTED = [
    (MEGATRON, "megatron", dict(gpus=128, tp=8, pp=4, dp=4, virtual_stages=5, pp_schedule="interleaved",
                                micro_batch=1, global_batch=128, seq_len=8192, precision="fp8", zero=1,
                                sequence_parallel=True, recompute="none"),
     dict(name="megatron-core-0.8", fp8_recipe="current", tp_comm_overlap="full", cross_entropy="fused",
          attention="cudnn", overlap_dp_comm=True)),
    (NEMO2, "nemo", dict(gpus=128, tp=8, pp=4, dp=4, virtual_stages=5, micro_batch=1, global_batch=128,
                         seq_len=8192, precision="fp8", zero=1, sequence_parallel=True),
     dict(name="nemo-25.04", fp8_recipe="current", tp_comm_overlap="full", grad_accum_dtype="bf16")),
    (NEMO1, "nemo", dict(gpus=64, tp=4, pp=4, dp=4, virtual_stages=5, micro_batch=1, global_batch=128,
                         seq_len=8192, precision="bf16", zero=1, sequence_parallel=True, recompute="selective"),
     dict(name="nemo-24.07", tp_comm_overlap="full", grad_accum_dtype="bf16", overlap_param_gather=True)),
    (TORCHTITAN, "torchtitan", dict(gpus=128, tp=8, pp=1, dp=16, micro_batch=8, global_batch=128, seq_len=8192,
                                    precision="bf16", zero=3, recompute="full"),
     dict(name="unknown", framework="torchtitan", elementwise="fused", tp_comm_overlap="full",
          grad_accum_fusion=False, cross_entropy="eager")),
    (MAXTEXT, "maxtext", dict(gpus=64, tp=1, dp=64, micro_batch=2, global_batch=128, seq_len=8192,
                              precision="bf16", zero=3, recompute="full"),
     dict(framework="maxtext", attention="cudnn", elementwise="fused")),
]


@pytest.mark.parametrize("path,framework,job,software", EXPECTED, ids=lambda x: getattr(x, "name", ""))
def test_each_framework_config_becomes_a_spec_that_runs(path, framework, job, software):
    assert detect(path.read_text(), path.suffix, str(path)) == framework
    spec, report = import_config(path)
    assert report.framework == framework
    loaded = teton.load_spec(yaml.safe_load(yaml.safe_dump(spec)))  # what --spec-out writes reads back
    for field, value in job.items():
        assert getattr(loaded.job, field) == value, field
    for field, value in software.items():
        assert getattr(loaded.job.software, field) == value, field
    r = teton.simulate(spec)
    assert r.step_time_s > 0 and 0 < r.mfu < 1
    # each recipe ran on its GPUs: it fits within the memory model's tolerance (NeMo's 70B bf16 recipe
    # holds 78.4 GiB of an 80 GB H100 with the SwiGLU product its down projection keeps, past the
    # 75.5 GiB teton leaves after its fragmentation allowance)
    assert fits_within_tolerance(loaded), "does not fit even within the memory model's tolerance"
    fields = {row.field for row in report.mapped}
    assert {"job.gpus", "job.micro_batch", "job.global_batch", "job.seq_len", "job.precision"} <= fields | {
        row.field for row in report.defaulted}


def test_every_key_is_mapped_or_named():
    """Nothing is dropped in silence: every argument of the Megatron script is a mapped or a
    no-meaning row, and every teton job field the script leaves out is a defaulted one."""
    _, report = import_config(MEGATRON)
    launcher, args = read_command(MEGATRON.read_text())
    flags = set(parse_flags(args))
    keys = {r.key for r in report.mapped} | {r.key for r in report.no_meaning}
    split = {k.strip() for r in report.mapped for k in r.key.split(" x ")}
    assert flags <= keys | split
    assert next(r for r in report.mapped if r.field == "job.gpus").key == "torchrun --nnodes x --nproc-per-node"
    ignored = {r.key: r.why for r in report.no_meaning}
    assert "training hyper-parameter" in ignored["--lr"] and "data" in ignored["--data-path"]
    assert "--save" in ignored and "torchrun --rdzv-backend" in ignored
    defaulted = {r.field for r in report.defaulted}
    assert {"job.cp", "job.dp", "cluster", "software.cuda_graphs"} <= defaulted


def test_megatron_defaults_are_megatrons_not_tetons():
    """A flag left out takes Megatron-LM's default: no sequence parallelism, no distributed
    optimizer, no DP overlap, GELU, LayerNorm, learned positions, tied embeddings, dropout."""
    text = ("torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py --num-layers 24 --hidden-size 2048 "
            "--num-attention-heads 16 --seq-length 2048 --micro-batch-size 2 --global-batch-size 64 --bf16 "
            "--tensor-model-parallel-size 2 --vocab-size 50257")
    spec, report = import_config(text)
    s = teton.load_spec(spec)
    assert (s.job.gpus, s.job.tp, s.job.dp) == (16, 2, 8)
    assert not s.job.sequence_parallel and s.job.zero == 0 and not s.job.overlap_dp_comm
    assert (s.model.mlp, s.model.norm, s.model.position_embedding) == ("gelu", "layernorm", "learned")
    assert s.model.tied_embeddings and s.model.dropout and s.model.bias
    assert s.model.ffn_hidden == 4 * 2048 and s.model.vocab == 50432  # padded to 128 x tp
    assert s.job.tp_overlap == "bwd"
    why = {r.field: r.why for r in report.defaulted}
    assert "Megatron-LM" in why["job.sequence_parallel"] and "Megatron-LM" in why["model.mlp"]


def test_torchrun_without_nnodes_is_one_node():
    spec, report = import_config("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
                                 "--num-attention-heads 32 --seq-length 4096 --micro-batch-size 1 --bf16 "
                                 "--vocab-size 32000 --tensor-model-parallel-size 8")
    assert spec["job"]["gpus"] == 8 and set(spec) <= {"cluster", "model", "software", "job", "notes"}
    assert next(r for r in report.mapped if r.field == "job.gpus").key == "torchrun --nproc-per-node"
    assert teton.simulate(spec).step_time_s > 0


def test_megatron_script_shell_features():
    text = ('N=4\nARGS=(\n  --num-layers 8   # a comment\n  --hidden-size ${HIDDEN:-1024}\n)\n'
            'CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun --nnodes=$N --nproc_per_node 8 pretrain_gpt.py ${ARGS[@]} \\\n'
            '  --data-path a b c\n')
    launcher, args = read_command(text)
    assert launcher == ["torchrun", "--nnodes=4", "--nproc_per_node", "8"]
    assert parse_flags(args) == {"--num-layers": "8", "--hidden-size": "1024", "--data-path": ["a", "b", "c"]}


def test_vocab_from_a_set_override_and_a_known_tokenizer():
    text = MEGATRON.read_text().replace("--tokenizer-model $TOKENIZER_MODEL", "--tokenizer-model /tok.model")
    with pytest.raises(SpecError, match=r"--vocab-size.*add --vocab-size N"):
        import_config(text)
    spec, report = import_config(text, overrides=["model.vocab=128256"])
    assert teton.load_spec(spec).model.vocab == 128256
    assert any(r.key == "override" and r.field == "model.vocab" for r in report.mapped)


def test_gpus_from_the_option_only_where_the_config_has_none():
    titan = TORCHTITAN.read_text().replace("data_parallel_shard_degree = 16", "data_parallel_shard_degree = -1")
    with pytest.raises(SpecError, match="give --gpus N"):
        import_config(titan, "torchtitan")
    spec, _ = import_config(titan, "torchtitan", gpus=256)
    assert teton.load_spec(spec).job.dp == 32
    with pytest.raises(SpecError, match="the config gives 128 GPUs"):
        import_config(MEGATRON, gpus=64)


@pytest.mark.parametrize("path,old,new,match", [
    (MEGATRON, "--tensor-model-parallel-size 8", "--tensor-model-parallel-size 16",
     r"^--tensor-model-parallel-size = '16': must divide model.kv_heads \(8\)"),
    (MEGATRON, "--bf16\n    --fp8-format hybrid\n", "", r"^--bf16 = None: missing: .* fp32"),
    (MEGATRON, "--fp8-format hybrid", "--fp8-format e5m2", r"^--fp8-format = 'e5m2': one of hybrid, e4m3"),
    (MEGATRON, "--num-layers 80", "--num-layers $LAYERS", r"unset shell variable"),
    (MEGATRON, "--cross-entropy-loss-fusion", "--recompute-granularity full --recompute-method block "
     "--recompute-num-layers 2", r"^--recompute-num-layers = '2': with --recompute-method = 'block'"),
    (MEGATRON, "--manual-gc", "--some-new-flag 3", None),
    (NEMO2, "fp8_recipe: tensorwise", "fp8_recipe: rowwise", r"^trainer.plugins.fp8_recipe = 'rowwise': one of"),
    (NEMO2, "Llama3Config70B", "Llama4Config", r"^model.config._target_ = .*not a model config teton has a preset"),
    (TORCHTITAN, 'flavor = "70B"', 'flavor = "1T"', r"^model.flavor = '1T': one of 8B, 70B, 405B for llama3"),
    (TORCHTITAN, "data_parallel_replicate_degree = 1", "data_parallel_replicate_degree = 2", r"HSDP"),
    (TORCHTITAN, 'mode = "full"', 'mode = "partial"', r"^activation_checkpoint.mode = 'partial': one of none"),
    (MAXTEXT, 'remat_policy: "full"', 'remat_policy: "minimal"', r"^remat_policy = 'minimal': one of full"),
    (MAXTEXT, "dcn_data_parallelism: 1", "dcn_data_parallelism: 2", r"axes multiply to 128, not 64|HSDP"),
    (MAXTEXT, 'hardware: "gpu"', 'hardware: "tpu"', r"GPU clusters"),
])
def test_bad_input_is_one_line_naming_their_key(path, old, new, match):
    text = path.read_text()
    assert old in text
    fw = {".sh": "megatron", ".toml": "torchtitan"}.get(path.suffix, "nemo" if "nemo" in path.name else "maxtext")
    if match is None:  # a harmless edit still imports
        import_config(text.replace(old, new), fw)
        return
    with pytest.raises(SpecError, match=match) as err:
        import_config(text.replace(old, new), fw)
    assert "\n" not in str(err.value)


def test_not_a_config_and_not_a_framework():
    with pytest.raises(SpecError, match="cannot tell the framework"):
        import_config("a: 1\n")
    with pytest.raises(SpecError, match="already a teton spec"):
        import_config(str(Path(__file__).resolve().parents[2] / "examples" / "llama3-405b-16k.yaml"))
    with pytest.raises(SpecError, match="one of auto, megatron"):
        import_config(MEGATRON, "deepspeed")


def test_cli_writes_the_spec_and_lists_what_it_did_not_map(cli, tmp_path):
    out = tmp_path / "spec.yaml"
    code, stdout, _ = cli("import", str(NEMO2), "--spec-out", str(out))
    assert code == 0 and "no meaning in teton" in stdout and "optim.config.lr" in stdout
    text = out.read_text()
    assert "# no meaning in teton: optim.config.lr" in text
    assert teton.simulate(out).step_time_s > 0
    code, stdout, _ = cli("import", str(MAXTEXT), "--json")
    import json

    doc = json.loads(stdout)
    assert doc["spec"]["job"]["zero"] == 3 and any(r["key"] == "learning_rate" for r in doc["no_meaning"])
    code, _, err = cli("import", str(TORCHTITAN), "--set", "job.tp=3")
    assert code == 2 and err.strip().startswith("error: --set job.tp=3") and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("path", [MEGATRON, NEMO2, NEMO1, TORCHTITAN, MAXTEXT], ids=lambda p: p.name)
def test_no_key_is_dropped_in_silence(path):
    """Every key of the config has a row: mapped (alone or in a product like ``a x b``) or no meaning."""
    import tomllib

    from teton.spec.frameworks.common import flatten

    _, report = import_config(path)
    if path.suffix == ".sh":
        launcher, args = read_command(path.read_text())
        keys = set(parse_flags(args)) | {f"torchrun {k}" for k in parse_flags(launcher[1:])}
    else:
        keys = set(flatten(tomllib.loads(path.read_text()) if path.suffix == ".toml" else yaml.safe_load(path.read_text())))
    rows = {part.strip() for r in report.mapped for part in r.key.split(" x ")} | {r.key for r in report.no_meaning}
    rows |= {"torchrun " + k for k in rows}
    assert keys <= rows, sorted(keys - rows)


def test_a_nemo_field_over_its_preset_and_a_megatron_moe():
    text = NEMO2.read_text().replace("    cross_entropy_loss_fusion: true", "    cross_entropy_loss_fusion: true\n"
                                     "    num_layers: 40\n    hidden_size: 8192")
    spec, report = import_config(text, "nemo")
    assert spec["model"] == {"base": "llama3-70b", "layers": 40}
    assert any(r.key == "model.config.hidden_size" and r.note == "as preset llama3-70b" for r in report.mapped)
    assert teton.load_spec(spec).model.layers == 40
    moe = ("pretrain_gpt.py --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
           "--group-query-attention --num-query-groups 8 --seq-length 4096 --micro-batch-size 1 "
           "--global-batch-size 256 --bf16 --swiglu --normalization RMSNorm --position-embedding-type rope "
           "--untie-embeddings-and-output-weights --disable-bias-linear --vocab-size 32000 --num-experts 8 "
           "--moe-router-topk 2 --expert-model-parallel-size 8 --tensor-model-parallel-size 2 "
           "--sequence-parallel --use-distributed-optimizer --attention-dropout 0 --hidden-dropout 0")
    spec, _ = import_config(moe, gpus=64)
    s = teton.load_spec(spec)
    assert (s.model.experts, s.model.top_k, s.job.ep, s.job.dp) == (8, 2, 8, 32)
    assert teton.simulate(s).step_time_s > 0
    spec, _ = import_config(moe.replace("--position-embedding-type rope", "--position-embedding-type yarn"), gpus=64)
    assert teton.load_spec(spec).model.position_embedding == "yarn"  # GPT-OSS's rotary: Megatron runs it eager
    spec, _ = import_config(moe + " --expert-tensor-parallel-size 1 --use-tp-pp-dp-mapping", gpus=64)
    s = teton.load_spec(spec)  # experts whole on each rank: EP 8 over TP 2 x DP 4, edp = 2 * 32 / 8
    assert (s.job.etp, s.job.layout.edp, s.job.parallel_order) == (1, 8, ("tp", "cp", "ep", "pp", "dp"))


def test_nemo_reads_expert_tensor_parallelism():
    """MegatronStrategy's expert_tensor_parallel_size is job.etp (a dense model takes only its tp)."""
    text = NEMO2.read_text().replace("    context_parallel_size: 1\n",
                                     "    context_parallel_size: 1\n    expert_tensor_parallel_size: 8\n")
    spec, report = import_config(text, "nemo")
    assert spec["job"]["etp"] == 8
    assert any(r.key == "trainer.strategy.expert_tensor_parallel_size" and r.field == "job.etp" for r in report.mapped)


def test_a_cluster_file_is_written_relative_to_the_spec(cli, tmp_path):
    cluster = tmp_path / "clusters" / "mine.yaml"
    cluster.parent.mkdir()
    cluster.write_text("base: dgx-h100-superpod\n")
    out = tmp_path / "specs" / "job.yaml"
    out.parent.mkdir()
    code, _, err = cli("import", str(MAXTEXT), "--cluster", str(cluster), "--spec-out", str(out))
    assert code == 0, err
    assert yaml.safe_load(out.read_text())["cluster"] == "../clusters/mine.yaml"
    assert teton.load_spec(out).cluster.gpus == 1024


def test_a_maxtext_command_line_reads_as_its_yaml():
    """``python3 -m MaxText.train base.yml key=value ...`` is the same config as the YAML."""
    from_yaml, _ = import_config(MAXTEXT)
    keys = yaml.safe_load(MAXTEXT.read_text())
    args = " ".join(f"{k}={'' if v == '' else v}" for k, v in keys.items() if k != "base_config" and v != "")
    script = f"#!/bin/bash\nexport XLA_FLAGS=--xla_gpu_enable_latency_hiding_scheduler=true\n" \
             f"python3 -m MaxText.train MaxText/configs/base.yml \\\n  {args}\n"
    spec, report = import_config(script)
    assert report.framework == "maxtext"
    assert spec["job"] == from_yaml["job"] and spec["model"] == from_yaml["model"]
    assert {"base_config", "learning_rate", "run_name"} <= {r.key for r in report.no_meaning}


def test_a_nemo_checkpoint_model_yaml():
    """A NeMo 2.0 checkpoint's context/model.yaml: the model's class and TransformerConfig's degrees;
    the GPU count and the batch come from the import's options."""
    text = ("_target_: nemo.collections.llm.gpt.model.llama.LlamaModel\nconfig:\n"
            "  _target_: nemo.collections.llm.gpt.model.llama.Llama3Config70B\n  num_layers: 80\n"
            "  tensor_model_parallel_size: 8\n  pipeline_model_parallel_size: 4\n"
            "  virtual_pipeline_model_parallel_size: 5\n  sequence_parallel: true\n  seq_length: 8192\n")
    with pytest.raises(SpecError, match="give --gpus N"):
        import_config(text)
    spec, report = import_config(text, gpus=128, overrides=["job.global_batch=128"])
    s = teton.load_spec(spec)
    assert (s.model.name, s.job.tp, s.job.pp, s.job.virtual_stages, s.job.dp) == ("llama3-70b", 8, 4, 5, 4)
    assert any(r.key == "model.config.num_layers" and r.note == "as preset llama3-70b" for r in report.mapped)


DEEPSEEK_LIKE = ("pretrain_gpt.py --num-layers 8 --hidden-size 2048 --ffn-hidden-size 8192 --moe-ffn-hidden-size 1024 "
                 "--num-attention-heads 16 --seq-length 4096 --micro-batch-size 1 --global-batch-size 256 --bf16 "
                 "--swiglu --normalization RMSNorm --position-embedding-type rope --untie-embeddings-and-output-weights "
                 "--disable-bias-linear --vocab-size 32000 --num-experts 64 --moe-router-topk 6 "
                 "--expert-model-parallel-size 8 --attention-dropout 0 --hidden-dropout 0 "
                 "--moe-shared-expert-intermediate-size 2048")


def test_megatron_shared_experts_and_moe_layer_placement():
    """Megatron-Core's shared expert width is that many routed experts' width; --moe-layer-freq's
    dense-prefix pattern is DeepSeek's first K dense layers, an integer one MoE layer in N."""
    spec, report = import_config(DEEPSEEK_LIKE + " --moe-layer-freq ([0]*1+[1]*7)", gpus=64)
    s = teton.load_spec(spec)
    assert (s.model.ffn_hidden, s.model.moe_ffn_hidden, s.model.shared_experts, s.model.first_dense_layers) == (
        8192, 1024, 2, 1)
    assert [t.ffn for t in s.model.layer_types()].count("moe") == 7
    assert any(r.key == "--moe-shared-expert-intermediate-size" and r.field == "model.shared_experts"
               for r in report.mapped)
    spec, _ = import_config(DEEPSEEK_LIKE + " --moe-layer-freq 2", gpus=64)
    assert [t.ffn for t in teton.load_spec(spec).model.layer_types()].count("moe") == 4
    for bad, needle in ((" --moe-layer-freq ([1]*4+[0]*4)", "--moe-layer-freq"),
                        (" --moe-layer-freq ([0]*1+[1]*9)", "K + M = --num-layers")):
        with pytest.raises(SpecError, match=re.escape(needle)):
            import_config(DEEPSEEK_LIKE + bad, gpus=64)
    with pytest.raises(SpecError, match="a multiple of the experts' width"):
        import_config(DEEPSEEK_LIKE.replace("intermediate-size 2048", "intermediate-size 1500"), gpus=64)


def test_megatron_moe_all_to_all_overlap_flag():
    """--overlap-moe-expert-parallel-comm is the schedule that hides the all-to-all; without it
    the stack's default (off) holds."""
    spec, report = import_config(DEEPSEEK_LIKE + " --overlap-moe-expert-parallel-comm", gpus=64)
    assert teton.load_spec(spec).job.software.ep_comm_overlap is True
    assert any(r.key == "--overlap-moe-expert-parallel-comm" and r.field == "software.ep_comm_overlap"
               for r in report.mapped)
    spec, _ = import_config(DEEPSEEK_LIKE, gpus=64)
    assert teton.load_spec(spec).job.software.ep_comm_overlap is False


def test_megatron_fp8_param_gather_flag():
    """--fp8-param-gather keeps the layers' weights in fp8 only (software.fp8_param_gather); the
    Megatron-LM preset without it keeps bf16 weights."""
    text = MEGATRON.read_text()
    assert "--fp8-param-gather" not in text and "--fp8-format hybrid" in text
    spec, report = import_config(text.replace("--fp8-format hybrid", "--fp8-format hybrid --fp8-param-gather"))
    assert teton.load_spec(spec).job.software.fp8_param_gather is True
    assert any(r.key == "--fp8-param-gather" and r.field == "software.fp8_param_gather" for r in report.mapped)
    spec, _ = import_config(text)
    assert teton.load_spec(spec).job.software.fp8_param_gather is False


def test_megatron_token_drop_and_padding_flags():
    """--moe-expert-capacity-factor is token dropping at that capacity; with
    --moe-pad-expert-input-to-capacity every expert is padded to it; padding alone is refused."""
    flags = " --moe-expert-capacity-factor 1.25 --moe-pad-expert-input-to-capacity"
    spec, report = import_config(DEEPSEEK_LIKE + flags, gpus=64)
    m = teton.load_spec(spec).model
    assert (m.capacity_factor, m.pad_to_capacity) == (1.25, True)
    assert {r.field for r in report.mapped} >= {"model.capacity_factor", "model.pad_to_capacity"}
    spec, _ = import_config(DEEPSEEK_LIKE, gpus=64)
    assert (teton.load_spec(spec).model.capacity_factor, teton.load_spec(spec).model.pad_to_capacity) == (None, False)
    with pytest.raises(SpecError, match="needs --moe-expert-capacity-factor"):
        import_config(DEEPSEEK_LIKE + " --moe-pad-expert-input-to-capacity", gpus=64)


@pytest.mark.parametrize(("flags", "graphs"), [
    (" --cuda-graph-impl full_iteration", "full"),
    (" --cuda-graph-impl transformer_engine --cuda-graph-scope full_iteration", "full"),
    (" --cuda-graph-impl transformer_engine", "layers"),
    (" --cuda-graph-impl local --cuda-graph-modules attn,moe", "layers"),
    (" --cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router moe_preprocess", "none"),
    (" --cuda-graph-impl none", "none"),
])
def test_megatron_cuda_graph_impl_and_modules(flags, graphs):
    """Megatron-Core 0.19's CUDA graphs: full_iteration captures the step; per-layer graphs count as
    whole layers when their modules cover the mixer and the MoE; the router-only scopes of the
    MoE recipes leave the experts eager, which teton takes as no graph (and says so)."""
    spec, report = import_config(DEEPSEEK_LIKE + flags, gpus=64)
    assert teton.load_spec(spec).job.software.cuda_graphs == graphs
    if "moe_router" in flags:
        assert any(r.field == "software.cuda_graphs" and "moe part stays eager" in r.note for r in report.mapped)


@pytest.mark.parametrize(("flags", "recompute", "modules"), [
    (" --recompute-granularity selective --recompute-modules moe_act layernorm", "selective", ["moe_act", "layernorm"]),
    (" --recompute-granularity selective --recompute-modules moe", "selective", ["moe"]),
    (" --recompute-granularity selective", "selective", None),  # Megatron-Core's default: core_attn
    (" --recompute-granularity full --recompute-modules moe", "full", None),  # read only under selective
])
def test_megatron_recompute_modules(flags, recompute, modules):
    """--recompute-modules names what selective recompute replays (Megatron-Core 0.16
    TransformerConfig.recompute_modules); under another granularity Megatron does not read it."""
    spec, report = import_config(DEEPSEEK_LIKE + flags, gpus=64)
    job = teton.load_spec(spec).job
    assert (job.recompute, list(job.recompute_modules) if job.recompute_modules else None) == (recompute, modules)
    if "--recompute-modules" in flags:
        rows = [r for r in (*report.mapped, *report.no_meaning) if r.key == "--recompute-modules"]
        assert rows and (recompute == "selective") == any(getattr(r, "field", "") == "job.recompute_modules"
                                                          for r in rows)
    with pytest.raises(SpecError, match=r"^--recompute-modules = 'attn': not a Megatron-Core recompute module"):
        import_config(DEEPSEEK_LIKE + " --recompute-granularity selective --recompute-modules attn", gpus=64)


def test_nemo_recompute_modules():
    text = NEMO2.read_text()
    old = "    recompute_granularity: null\n"
    assert old in text
    spec, _ = import_config(text.replace(old, "    recompute_granularity: selective\n"
                                              "    recompute_modules: [core_attn, layernorm]\n"), "nemo")
    job = teton.load_spec(spec).job
    assert (job.recompute, job.recompute_modules) == ("selective", ("core_attn", "layernorm"))



@pytest.mark.parametrize(("value", "algo"), [("p2p", "ring"), ("all_gather", "all_gather"), ("a2a", "a2a")])
def test_cp_comm_type(value, algo):
    """Megatron-Core's cp_comm_type, from Megatron-LM's flag and NeMo 2.0's config alike;
    a2a+p2p (hierarchical) is refused in one line."""
    spec, _ = import_config(DEEPSEEK_LIKE + f" --context-parallel-size 2 --cp-comm-type {value}", gpus=64)
    assert teton.load_spec(spec).job.cp_algo == algo
    text = NEMO2.read_text().replace("    recompute_granularity: null\n",
                                     f"    recompute_granularity: null\n    cp_comm_type: {value}\n")
    spec, _ = import_config(text, "nemo")
    assert teton.load_spec(spec).job.software.cp_comm == algo
    with pytest.raises(SpecError, match=r"^--cp-comm-type = 'ring': one of p2p, all_gather, a2a, a2a\+p2p"):
        import_config(DEEPSEEK_LIKE + " --cp-comm-type ring", gpus=64)


def test_hierarchical_cp_comm_type_takes_its_sizes():
    """a2a+p2p (hierarchical CP): the all-to-all groups' size from the hierarchical sizes, Megatron-LM's
    flag and NeMo 2.0's config alike; without them, one line naming the key."""
    flags = " --context-parallel-size 8 --cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 4"
    spec, _ = import_config(DEEPSEEK_LIKE + flags, gpus=64)
    job = teton.load_spec(spec).job
    assert (job.cp_algo, job.cp_a2a, job.layout.cp_a2a) == ("a2a+p2p", 2, 2)
    text = NEMO2.read_text().replace("    recompute_granularity: null\n",
                                     "    recompute_granularity: null\n    cp_comm_type: a2a+p2p\n"
                                     "    hierarchical_context_parallel_sizes: [1, 1]\n")
    spec, _ = import_config(text, "nemo")  # an all-to-all group of one rank: Transformer Engine runs p2p
    assert teton.load_spec(spec).job.software.cp_comm == "ring"
    with pytest.raises(SpecError, match=r"^--hierarchical-context-parallel-sizes = None: a2a\+p2p needs"):
        import_config(DEEPSEEK_LIKE + " --context-parallel-size 8 --cp-comm-type a2a+p2p", gpus=64)


MLA_FLAGS = (" --multi-latent-attention --q-lora-rank 1536 --kv-lora-rank 512 --qk-head-dim 128 --qk-pos-emb-head-dim 64"
             " --v-head-dim 128 --mtp-num-layers 1 --window-size 4096,0 --use-precision-aware-optimizer"
             " --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 --qk-layernorm --moe-token-dispatcher-type alltoall")


def test_megatron_mla_mtp_window_and_adam_moments_are_mapped():
    """Megatron-Core's MLA dimensions, multi-token prediction, (left, right) window and bf16 Adam
    moments each reach the teton field that prices them: none is listed as unread, and the step
    and the memory move as the fields say (MTP adds a module's work, bf16 moments save 4 bytes a
    parameter)."""
    spec, report = import_config(DEEPSEEK_LIKE + MLA_FLAGS, gpus=64)
    s = teton.load_spec(spec)
    m = s.model
    assert (m.q_lora_rank, m.kv_lora_rank, m.head_dim, m.qk_rope_head_dim, m.v_head_dim) == (1536, 512, 128, 64, 128)
    assert (m.mla, m.mtp_depth, m.sliding_window, s.job.adam_moments) == (True, 1, 4097, "bf16")
    assert not m.qk_norm  # under MLA, --qk-layernorm norms the latents, which teton's MLA always has
    flags = {f.split()[0] for f in MLA_FLAGS.split(" --") if f}
    unread = {r.key for r in report.no_meaning if r.why in ("not a key the importer reads",
                                                             "read, but no teton field of its own")}
    assert not unread & {"--" + f for f in flags}, unread
    assert "latents" in next(r.why for r in report.no_meaning if r.key == "--qk-layernorm")
    r = teton.simulate(spec)
    no_mtp = teton.simulate(import_config(DEEPSEEK_LIKE + MLA_FLAGS.replace(" --mtp-num-layers 1", ""), gpus=64)[0])
    fp32 = teton.simulate(import_config(DEEPSEEK_LIKE + MLA_FLAGS.replace("dtype bf16", "dtype fp32"), gpus=64)[0])
    assert r.step_time_s > no_mtp.step_time_s and r.memory_per_gpu_bytes < fp32.memory_per_gpu_bytes
    # without MLA, --qk-layernorm is Qwen3's QK norm
    spec, _ = import_config(DEEPSEEK_LIKE + " --qk-layernorm --moe-token-dispatcher-type alltoall", gpus=64)
    assert teton.load_spec(spec).model.qk_norm is True


@pytest.mark.parametrize(("old", "new", "match"), [
    ("--window-size 4096,0", "--window-size 4096,128", r"^--window-size = '4096,128': a causal window"),
    ("--window-size 4096,0", "--window-size 4096,0 --window-attn-skip-freq [1,1,0]*4",
     r"^--window-attn-skip-freq = '\[1,1,0\]\*4': an integer N"),
    (" --use-precision-aware-optimizer", "", r"^--exp-avg-dtype = 'bf16': needs --use-precision-aware-optimizer"),
    ("--exp-avg-sq-dtype bf16", "--exp-avg-sq-dtype fp32", r"^--exp-avg-sq-dtype = 'fp32': must match --exp-avg-dtype"),
    ("--exp-avg-dtype bf16", "--exp-avg-dtype fp8", r"^--exp-avg-dtype = 'fp8': one of fp32, bf16, fp16"),
    ("--multi-latent-attention", "--multi-latent-attention --group-query-attention --num-query-groups 4",
     r"^--multi-latent-attention = True: Megatron-LM refuses it with --group-query-attention"),
])
def test_megatron_attention_and_optimizer_flags_teton_cannot_model_are_refused(old, new, match):
    with pytest.raises(SpecError, match=match) as err:
        import_config((DEEPSEEK_LIKE + MLA_FLAGS).replace(old, new), gpus=64)
    assert "\n" not in str(err.value)


def test_megatron_window_every_nth_layer_full():
    """--window-attn-skip-freq N: Megatron's full layers are layer_number % N == 0 (1-based), teton's
    global_attention_every N the same layers."""
    spec, _ = import_config(DEEPSEEK_LIKE + " --moe-token-dispatcher-type alltoall --window-size 127,0 "
                            "--window-attn-skip-freq 4", gpus=64)
    m = teton.load_spec(spec).model
    assert (m.sliding_window, m.global_attention_every) == (128, 4)
    assert [t.windowed for t in m.layer_types()] == [i % 4 != 0 for i in range(1, 9)]


@pytest.mark.parametrize(("flags", "balance"), [
    (" --moe-router-load-balancing-type seq_aux_loss", "aux_loss"),
    (" --moe-router-load-balancing-type sinkhorn", "aux_loss"),
    (" --moe-router-force-load-balancing --moe-router-load-balancing-type none", "forced"),
    ("", "aux_loss"),
])
def test_megatron_router_balancing(flags, balance):
    """Megatron's balancing losses and algorithms spread tokens evenly in expectation (teton's
    aux_loss); --moe-router-force-load-balancing is forced; no balancing at all is refused."""
    spec, report = import_config(DEEPSEEK_LIKE + " --moe-token-dispatcher-type alltoall" + flags, gpus=64)
    assert teton.load_spec(spec).job.moe_router_balance == balance
    assert "job.moe_router_balance" in {r.field for r in (*report.mapped, *report.defaulted)}
    with pytest.raises(SpecError, match=r"^--moe-router-load-balancing-type = 'none': one of aux_loss"):
        import_config(DEEPSEEK_LIKE + " --moe-router-load-balancing-type none", gpus=64)


def test_megatron_token_dispatcher_is_named_honestly():
    """teton prices the EP dispatch as an all-to-all: alltoall / flex are listed as such, the
    allgather dispatcher over an EP group is refused, and Megatron's default (allgather) is named
    in a defaulted row, not passed over."""
    _, report = import_config(DEEPSEEK_LIKE + " --moe-token-dispatcher-type flex", gpus=64)
    assert "all-to-all" in next(r.why for r in report.no_meaning if r.key == "--moe-token-dispatcher-type")
    with pytest.raises(SpecError, match=r"^--moe-token-dispatcher-type = 'allgather': alltoall or flex"):
        import_config(DEEPSEEK_LIKE + " --moe-token-dispatcher-type allgather", gpus=64)
    _, report = import_config(DEEPSEEK_LIKE, gpus=64)
    assert any("allgather" in r.why and "not model" in r.why for r in report.defaulted)


MEGATRON_DEEPSPEED = ("deepspeed --num_gpus 8 --num_nodes 2 pretrain_gpt.py --num-layers 24 --hidden-size 2048 "
                      "--num-attention-heads 16 --seq-length 2048 --micro-batch-size 4 --global-batch-size 256 --bf16 "
                      "--vocab-size 50257 --deepspeed --deepspeed_config ds_config.json --zero-stage 3 "
                      "--no-pipeline-parallel --checkpoint-activations --use-flash-attn-v2")


def test_megatron_deepspeed_launch():
    """A Megatron-DeepSpeed launch is the megatron-deepspeed stack with its ZeRO stage, GPU count
    from the deepspeed launcher, DeepSpeed's activation checkpointing and FlashAttention-2."""
    spec, report = import_config(MEGATRON_DEEPSPEED)
    s = teton.load_spec(spec)
    assert (s.job.software.name, s.job.zero, s.job.gpus, s.job.recompute) == ("megatron-deepspeed", 3, 16, "full")
    assert (s.job.tp_overlap, s.job.software.attention, s.job.overlap_dp_comm) == ("none", "fa2", False)
    rows = {r.key: r.field for r in report.mapped}
    assert rows["--zero-stage"] == "job.zero" and rows["--deepspeed"] == "software.base"
    assert rows["deepspeed --num-nodes x --num-gpus"] == "job.gpus"
    assert teton.simulate(spec).step_time_s > 0
    spec, report = import_config(MEGATRON_DEEPSPEED.replace(" --zero-stage 3", ""))
    assert spec["job"]["zero"] == 1 and any(r.field == "job.zero" and "JSON" in r.why for r in report.defaulted)


@pytest.mark.parametrize(("old", "new", "match"), [
    (" --no-pipeline-parallel", "", r"^--zero-stage = '3': 0 or 1 under DeepSpeed's pipeline engine"),
    ("--zero-stage 3", "--zero-stage 4", r"^--zero-stage = '4': one of 0, 1, 2, 3"),
    ("--use-flash-attn-v2", "--use-flash-attn", r"^--use-flash-attn = True: not modelled under --deepspeed"),
    ("--checkpoint-activations", "--checkpoint-activations --checkpoint-num-layers 2",
     r"^--checkpoint-num-layers = '2': 1"),
    (" --deepspeed ", " ", r"^--checkpoint-activations = True: no longer read by Megatron-LM"),
])
def test_megatron_deepspeed_refusals(old, new, match):
    assert old in MEGATRON_DEEPSPEED
    with pytest.raises(SpecError, match=match) as err:
        import_config(MEGATRON_DEEPSPEED.replace(old, new))
    assert "\n" not in str(err.value)


def test_maxtext_default_model_takes_base_yml_values():
    """model_name default without base_* keys is base.yml's model (MaxText fills what the run's YAML
    leaves out); what the YAML gives wins."""
    text = ("model_name: default\nmax_target_length: 4096\nici_fsdp_parallelism: 8\ndcn_data_parallelism: 1\n"
            "per_device_batch_size: 1\n")
    spec, report = import_config(text, "maxtext")
    m = teton.load_spec(spec).model
    assert (m.layers, m.hidden, m.ffn_hidden, m.heads, m.kv_heads, m.head_dim, m.vocab) == (
        16, 2048, 7168, 16, 16, 128, 32000)
    assert (m.mlp, m.tied_embeddings) == ("swiglu", False)
    assert "base.yml" in next(r.why for r in report.defaulted if r.field == "model.layers")
    spec, _ = import_config(text + "base_emb_dim: 4096\nbase_num_decoder_layers: 4\n", "maxtext")
    assert (teton.load_spec(spec).model.hidden, teton.load_spec(spec).model.layers) == (4096, 4)


def test_docs_list_each_megatron_flag_where_the_importer_puts_it():
    """docs/import.md's Megatron-LM section names every flag the importer maps, and its no-meaning
    paragraph names none of them (--fp8-param-gather was listed there while mapped)."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "import.md").read_text()
    section = doc[doc.index("## Megatron-LM"):doc.index("## NeMo")].replace("_", "-")  # --num_gpus: --num-gpus
    no_meaning = section[section.index("No meaning:"):section.index("Stack:", section.index("No meaning:"))]
    mapped = set()
    for text, gpus in ((MEGATRON.read_text().replace("--fp8-format hybrid", "--fp8-format hybrid --fp8-param-gather"),
                        None), (DEEPSEEK_LIKE + MLA_FLAGS + " --moe-router-force-load-balancing", 64),
                       (MEGATRON_DEEPSPEED, None),
                       (DEEPSEEK_LIKE.replace(" --disable-bias-linear", "") + MLA_FLAGS
                        + " --main-grads-dtype bf16 --add-qkv-bias", 64)):
        _, report = import_config(text, gpus=gpus)
        mapped |= {k.strip() for r in report.mapped for k in r.key.split(" x ") if k.strip().startswith("--")}
    assert {k for k in mapped if k not in section} == set()
    assert {k for k in mapped if re.search(re.escape(k) + r"(?![\w-])", no_meaning)} == set()


def _nemo_mla_moe(config: dict | None = None, optim: dict | None = None) -> str:
    """The NeMo 2.0 dump with a small DeepSeek-like model of its own (MLATransformerConfig, 8 experts
    over EP 8 on 64 GPUs) in place of Llama 3 70B."""
    doc = yaml.safe_load(NEMO2.read_text())
    doc["trainer"]["num_nodes"] = 8
    doc["trainer"]["strategy"].update(tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
                                      virtual_pipeline_model_parallel_size=None, sequence_parallel=False,
                                      expert_model_parallel_size=8)
    doc["trainer"]["plugins"].update(fp8=None, fp8_recipe=None)
    doc["data"]["global_batch_size"] = 256
    doc["model"]["config"] = {
        "_target_": "megatron.core.transformer.transformer_config.MLATransformerConfig", "num_layers": 8,
        "hidden_size": 2048, "ffn_hidden_size": 8192, "moe_ffn_hidden_size": 1024, "num_attention_heads": 16,
        "num_moe_experts": 8, "moe_router_topk": 2, "vocab_size": 32000, "gated_linear_unit": True,
        "normalization": "RMSNorm", "position_embedding_type": "rope", "add_bias_linear": False,
        "hidden_dropout": 0.0, "attention_dropout": 0.0, "multi_latent_attention": True, "q_lora_rank": 1536,
        "kv_lora_rank": 512, "qk_head_dim": 128, "qk_pos_emb_head_dim": 64, "v_head_dim": 128,
        "mtp_num_layers": 1, "window_size": [4095, 0], "window_attn_skip_freq": 4, "qk_layernorm": True,
        "moe_router_load_balancing_type": "seq_aux_loss", "moe_router_force_load_balancing": False,
        "moe_token_dispatcher_type": "alltoall", "moe_grouped_gemm": True, **(config or {})}
    doc["optim"]["config"].update({"use_precision_aware_optimizer": True, "exp_avg_dtype": "torch.bfloat16",
                                   "exp_avg_sq_dtype": "torch.bfloat16", "main_params_dtype": "torch.float32",
                                   "main_grads_dtype": "torch.bfloat16", **(optim or {})})
    return yaml.safe_dump(doc)


NEMO_MLA_KEYS = ("multi_latent_attention", "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim",
                 "v_head_dim", "mtp_num_layers", "window_size", "window_attn_skip_freq", "qk_layernorm",
                 "moe_router_load_balancing_type", "moe_router_force_load_balancing", "moe_token_dispatcher_type",
                 "moe_grouped_gemm")
NEMO_OPTIM_KEYS = ("use_precision_aware_optimizer", "exp_avg_dtype", "exp_avg_sq_dtype", "main_params_dtype",
                   "main_grads_dtype")


def test_nemo_reads_mla_mtp_windows_routing_and_the_precision_aware_optimizer():
    """NeMo 2.0's TransformerConfig / OptimizerConfig names for what Megatron-LM's flags say reach
    the same teton fields: none is listed as unread or as a training hyper-parameter, the docs
    name each, and the step and memory move as the fields say."""
    spec, report = import_config(_nemo_mla_moe(), "nemo")
    s = teton.load_spec(spec)
    m = s.model
    assert (m.q_lora_rank, m.kv_lora_rank, m.head_dim, m.qk_rope_head_dim, m.v_head_dim) == (1536, 512, 128, 64, 128)
    assert (m.mla, m.mtp_depth, m.sliding_window, m.global_attention_every) == (True, 1, 4096, 4)
    assert (s.job.adam_moments, s.job.moe_router_balance, m.qk_norm) == ("bf16", "aux_loss", False)
    keys = {"model.config." + k for k in NEMO_MLA_KEYS} | {"optim.config." + k for k in NEMO_OPTIM_KEYS}
    why = {r.key: r.why for r in report.no_meaning}
    assert not {k for k in keys if k in why and (why[k].startswith(("not a key", "read, but", "a training")))}
    assert keys <= {r.key for r in report.mapped} | set(why)
    assert "grouped GEMM" in why["model.config.moe_grouped_gemm"] and "latents" in why["model.config.qk_layernorm"]
    doc = (Path(__file__).resolve().parents[2] / "docs" / "import.md").read_text()
    nemo2 = doc[doc.index("**NeMo 2.0**"):doc.index("**NeMo 1.0**")]
    assert {k for k in NEMO_MLA_KEYS + NEMO_OPTIM_KEYS if k not in nemo2} == set()
    r = teton.simulate(spec)
    fp32 = teton.simulate(import_config(_nemo_mla_moe(optim=dict(exp_avg_dtype="torch.float32",
                                                                 exp_avg_sq_dtype="torch.float32")), "nemo")[0])
    assert r.memory_per_gpu_bytes < fp32.memory_per_gpu_bytes
    # absent MLA dimensions take MLATransformerConfig's defaults, not Megatron-LM's argparse ones
    spec, report = import_config(_nemo_mla_moe({"q_lora_rank": None, "kv_lora_rank": None}), "nemo")
    assert (spec["model"]["q_lora_rank"], spec["model"]["kv_lora_rank"]) == (512, 512)
    assert any(r.field == "model.kv_lora_rank" and "MLATransformerConfig" in r.why for r in report.defaulted)


@pytest.mark.parametrize(("config", "optim", "match"), [
    ({"window_size": [4096, 128]}, {}, r"^model.config.window_size = \[4096, 128\]: a causal window"),
    ({"moe_token_dispatcher_type": "allgather"}, {}, r"^model.config.moe_token_dispatcher_type = 'allgather': "
     r"alltoall or flex"),
    ({"moe_router_load_balancing_type": "none"}, {}, r"^model.config.moe_router_load_balancing_type = 'none'"),
    ({}, {"main_params_dtype": "torch.float16"}, r"^optim.config.main_params_dtype = 'torch.float16': fp32"),
    ({}, {"exp_avg_dtype": "torch.uint8", "exp_avg_sq_dtype": "torch.uint8"},
     r"^optim.config.exp_avg_dtype = 'torch.uint8': one of fp32, bf16, fp16"),
    ({}, {"use_precision_aware_optimizer": False}, r"^optim.config.exp_avg_dtype = 'torch.bfloat16': needs "
     r"optim.config.use_precision_aware_optimizer"),
    ({"add_qkv_bias": True}, {}, r"^model.config.add_qkv_bias = True: not with model.config.add_bias_linear"),
])
def test_nemo_settings_teton_cannot_model_are_refused(config, optim, match):
    with pytest.raises(SpecError, match=match) as err:
        import_config(_nemo_mla_moe(config, optim), "nemo")
    assert "\n" not in str(err.value)


def test_megatron_main_grads_and_params_dtypes():
    """The precision-aware optimizer's main grads in bf16 leave Megatron-LM's gradient buffer in
    bf16 (software.grad_accum_dtype, less memory); master weights below fp32 are refused."""
    spec, report = import_config(DEEPSEEK_LIKE + MLA_FLAGS + " --main-grads-dtype bf16 --main-params-dtype fp32",
                                 gpus=64)
    assert teton.load_spec(spec).job.grad_accum_dtype == "bf16"
    assert any(r.key == "--main-grads-dtype" and r.field == "software.grad_accum_dtype" for r in report.mapped)
    assert "fp32" in next(r.why for r in report.no_meaning if r.key == "--main-params-dtype")
    base = teton.simulate(import_config(DEEPSEEK_LIKE + MLA_FLAGS, gpus=64)[0])
    assert teton.simulate(spec).memory_per_gpu_bytes < base.memory_per_gpu_bytes
    for extra, match in ((" --main-params-dtype fp16", r"^--main-params-dtype = 'fp16': fp32"),
                         (" --main-grads-dtype bf16 --accumulate-allreduce-grads-in-fp32",
                          r"^--main-grads-dtype = 'bf16': fp32 with --accumulate-allreduce-grads-in-fp32")):
        with pytest.raises(SpecError, match=match):
            import_config(DEEPSEEK_LIKE + MLA_FLAGS + extra, gpus=64)
    with pytest.raises(SpecError, match=r"^--main-grads-dtype = 'bf16': needs --use-precision-aware-optimizer"):
        import_config(DEEPSEEK_LIKE + " --main-grads-dtype bf16", gpus=64)


def test_megatron_grouped_gemm_and_qkv_bias():
    """--moe-grouped-gemm is how teton prices the experts (named so, not as unmodelled); without it
    Megatron-Core's per-expert GEMMs are named as priced grouped. --add-qkv-bias is among the
    biases of every linear layer, and refused where it would be the only ones."""
    _, report = import_config(DEEPSEEK_LIKE + " --moe-token-dispatcher-type alltoall --moe-grouped-gemm", gpus=64)
    why = next(r.why for r in report.no_meaning if r.key == "--moe-grouped-gemm")
    assert "teton prices the routed experts as this grouped GEMM" in why and "not modelled" not in why
    _, report = import_config(DEEPSEEK_LIKE + " --moe-token-dispatcher-type alltoall", gpus=64)
    assert any("SequentialMLP" in r.why and "not model" in r.why for r in report.defaulted)
    with pytest.raises(SpecError, match=r"^--add-qkv-bias = True: not with --disable-bias-linear") as err:
        import_config(DEEPSEEK_LIKE + " --add-qkv-bias", gpus=64)
    assert "\n" not in str(err.value)
    spec, report = import_config(DEEPSEEK_LIKE.replace(" --disable-bias-linear", "") + " --add-qkv-bias", gpus=64)
    assert teton.load_spec(spec).model.bias is True
    assert any(r.key == "--add-qkv-bias" and r.field == "model.bias" for r in report.mapped)


@pytest.mark.parametrize(("extra", "match"), [
    (" --tensor-model-parallel-size 2 --partition-activations",
     r"^--partition-activations = True: not modelled with --tensor-model-parallel-size 2"),
    (" --partition-activations --checkpoint-in-cpu", r"^--checkpoint-in-cpu = True: not modelled"),
    (" --remote-device cpu", r"^--remote-device = 'cpu': none: ZeRO-Infinity's parameter offload"),
    (" --remote-device disk", r"^--remote-device = 'disk': one of none, cpu, nvme"),
    (" --distribute-saved-activations", r"^--distribute-saved-activations = True: not modelled"),
])
def test_megatron_deepspeed_checkpoint_and_offload_options_are_refused_where_they_act(extra, match):
    with pytest.raises(SpecError, match=match) as err:
        import_config(MEGATRON_DEEPSPEED + extra)
    assert "\n" not in str(err.value)


def test_megatron_deepspeed_checkpoint_and_offload_options_named_where_they_do_nothing():
    """Without activation checkpoints there is nothing to partition or move, one TP rank keeps the
    whole layer input, and below ZeRO-3 no parameters are created off the GPU: each is named so."""
    text = MEGATRON_DEEPSPEED.replace("--zero-stage 3", "--zero-stage 1")
    _, report = import_config(text.replace(" --checkpoint-activations", "") + " --partition-activations "
                              "--checkpoint-in-cpu --remote-device cpu")
    why = {r.key: r.why for r in report.no_meaning}
    assert "no effect without --checkpoint-activations" in why["--checkpoint-in-cpu"]
    assert "no effect without --checkpoint-activations" in why["--partition-activations"]
    assert "no effect below ZeRO-3" in why["--remote-device"]
    _, report = import_config(text + " --partition-activations --deepspeed-activation-checkpointing")
    why = {r.key: r.why for r in report.no_meaning}
    assert "one rank keeps the whole layer input" in why["--partition-activations"]
    assert "same layer inputs" in why["--deepspeed-activation-checkpointing"]
