"""Model descriptions (transformer, MoE, MLA, hybrid Mamba-2) and their exact parameter counts."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from teton.errors import SpecError
from teton.spec.fields import MAX_LAYERS, MAX_SEQ_LEN, MAX_VOCAB, MAX_WIDTH, Section
from teton.spec.layer_types import LayerType, check_pattern, layer_type_counts, layer_types


class ModelSpec(Section):
    """A decoder-only model: transformer layers, or a hybrid of Mamba-2, attention and MLP layers
    (``layer_pattern``), dense or mixture-of-experts, with grouped-query or multi-head latent
    attention. Sizes are counts (layers, heads) or widths (hidden, ffn). Which layer is which:
    ``teton.spec.layer_types``; the formulas and their sources: docs/moe.md."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "custom"
    layers: int = Field(gt=0, le=MAX_LAYERS)
    hidden: int = Field(gt=0, le=MAX_WIDTH)
    ffn_hidden: int = Field(gt=0, le=MAX_WIDTH)
    heads: int = Field(gt=0, le=MAX_WIDTH)
    kv_heads: int | None = Field(default=None, gt=0, le=MAX_WIDTH)
    head_dim: int | None = Field(default=None, gt=0, le=MAX_WIDTH)
    vocab: int = Field(gt=0, le=MAX_VOCAB)
    # swiglu (gated: gate, up, down), gelu or relu2 (squared ReLU, Nemotron's: up and down only)
    mlp: Literal["swiglu", "gelu", "relu2"] = "swiglu"
    # a gated MLP's inputs clamped before the activation, the gate to at most this value and the
    # linear half to +-it (GPT-OSS's swiglu_limit 7.0; Megatron-Core's activation_func_clamp_value)
    glu_clamp: float | None = Field(default=None, gt=0)
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    # each query and key head normalised (model.norm over d_head) before rotary: Qwen3, OLMo-2,
    # Gemma 3 (Megatron-Core's qk_layernorm: two norm modules after the QKV split)
    qk_norm: bool = False
    bias: bool = False  # biases on the linear layers (GPT-2/3 style)
    # rope (rotary, applied to Q and K), yarn (rotary at YaRN's scaled frequencies with its attention
    # temperature folded into cos and sin, as GPT-OSS: the same work, a different kernel in some
    # stacks, software.fused_yarn_rope; an MLA model's YaRN is rope: its temperature goes to the
    # softmax scale), learned (an absolute position table), alibi (a bias the attention kernel
    # adds: no parameters, no separate kernel)
    position_embedding: Literal["rope", "yarn", "learned", "alibi"] = "rope"
    max_seq_len: int = Field(default=8192, gt=0, le=MAX_SEQ_LEN)
    dropout: bool = False  # dropout layers present (their masks are saved for backward)
    tied_embeddings: bool = False
    experts: int = Field(default=1, gt=0, le=MAX_LAYERS)  # routed experts of an MoE layer
    top_k: int = Field(default=1, gt=0, le=MAX_LAYERS)
    # width of one routed (and one shared) expert; default ffn_hidden, which dense layers use
    # (DeepSeek-V3's moe_intermediate_size 2,048 beside its dense layers' 18,432)
    moe_ffn_hidden: int | None = Field(default=None, gt=0, le=MAX_WIDTH)
    # experts every token passes through besides its top_k routed ones (DeepSeek-V3: 1, Llama 4: 1)
    shared_experts: int = Field(default=0, ge=0, le=MAX_LAYERS)
    first_dense_layers: int = Field(default=0, ge=0, le=MAX_LAYERS)  # DeepSeek's first_k_dense_replace
    moe_layer_interval: int = Field(default=1, gt=0, le=MAX_LAYERS)  # Llama 4's interleave_moe_layer_step
    # tokens an expert takes, relative to a balanced share (GShard / Switch's capacity factor: the
    # rest are dropped); None: dropless, every routed token is computed
    capacity_factor: float | None = Field(default=None, gt=0, le=MAX_LAYERS)
    # every expert's input padded to its capacity (Megatron-Core's moe_pad_expert_input_to_capacity,
    # on in Megatron-Bridge's token-drop recipes): fixed shapes, so the dispatcher needs no host sync
    pad_to_capacity: bool = False
    # node-limited routing: NVLink domains a token's routed copies reach at most (DeepSeek-V3: 4;
    # HF topk_group, Megatron-Core's moe_router_group_topk with one group per node), each sent over
    # the network once per domain (teton.collectives.node_limited); None: unlimited
    moe_max_nodes: int | None = Field(default=None, gt=0, le=MAX_LAYERS)
    # multi-head latent attention (DeepSeek-V2/V3): Q and KV projected through low-rank latents;
    # head_dim is then the no-RoPE part of a query / key head (qk_nope_head_dim)
    q_lora_rank: int | None = Field(default=None, gt=0, le=MAX_WIDTH)  # None: Q projected directly
    kv_lora_rank: int | None = Field(default=None, gt=0, le=MAX_WIDTH)  # set: the model uses MLA
    qk_rope_head_dim: int = Field(default=64, gt=0, le=MAX_WIDTH)  # MLA: the RoPE part of Q and K
    v_head_dim: int | None = Field(default=None, gt=0, le=MAX_WIDTH)  # MLA: value head dim; default head_dim
    mtp_depth: int = Field(default=0, ge=0, le=MAX_LAYERS)  # multi-token prediction modules (DeepSeek-V3: 1)
    # hybrid models: one character per layer, M Mamba-2, * attention, - MLP, E MoE (Nemotron-H)
    layer_pattern: str | None = None
    mamba_heads: int | None = Field(default=None, gt=0, le=MAX_WIDTH)  # default 2 hidden / mamba_head_dim
    mamba_head_dim: int = Field(default=64, gt=0, le=MAX_WIDTH)
    mamba_state_dim: int = Field(default=128, gt=0, le=MAX_WIDTH)  # N, ssm_state_size
    mamba_groups: int = Field(default=8, gt=0, le=MAX_WIDTH)  # G, n_groups of B and C
    mamba_conv_kernel: int = Field(default=4, gt=0, le=1024)  # Megatron-Core 0.16 MambaMixer's d_conv default
    sliding_window: int | None = Field(default=None, gt=0, le=MAX_SEQ_LEN)  # keys a windowed layer sees
    global_attention_every: int = Field(default=0, ge=0, le=MAX_LAYERS)  # every N-th layer full (0: none)
    published_params: float | None = None  # as the model card prints it, for checks

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        if self.kv_heads is not None and self.heads % self.kv_heads:
            raise SpecError("model.kv_heads", self.kv_heads, f"must divide model.heads ({self.heads})")
        if self.head_dim is None and self.hidden % self.heads:
            raise SpecError("model.heads", self.heads, f"must divide model.hidden ({self.hidden}) or set head_dim")
        if self.top_k > self.experts:
            raise SpecError("model.top_k", self.top_k, f"must be <= model.experts ({self.experts})")
        if self.pad_to_capacity and (self.capacity_factor is None or self.experts == 1):
            raise SpecError("model.pad_to_capacity", True, "needs an MoE model with model.capacity_factor set "
                            "(a dropless MoE has no capacity to pad to)")
        if self.moe_max_nodes is not None and not 1 < self.experts >= self.top_k >= self.moe_max_nodes:
            raise SpecError("model.moe_max_nodes", self.moe_max_nodes,
                            f"needs an MoE model (experts > 1) and must be <= model.top_k ({self.top_k})")
        if self.glu_clamp is not None and self.mlp != "swiglu":
            raise SpecError("model.glu_clamp", self.glu_clamp, f"clamps a gated MLP's inputs; model.mlp is {self.mlp}")
        if self.qk_norm and self.mla:
            raise SpecError("model.qk_norm", True, "is for grouped-query attention; MLA normalises its latents "
                            "(q_lora_rank, kv_lora_rank) instead")
        if self.layer_pattern is not None:
            check_pattern(self.layer_pattern, self.layers)
            if "E" in self.layer_pattern and self.experts == 1:
                raise SpecError("model.layer_pattern", self.layer_pattern, "has MoE layers (E) but model.experts is 1")
        if self.first_dense_layers >= self.layers and self.experts > 1:
            raise SpecError("model.first_dense_layers", self.first_dense_layers,
                            f"must be below model.layers ({self.layers}) for an MoE model")
        if self.mamba_heads is None and (2 * self.hidden) % self.mamba_head_dim and self.has_mamba:
            raise SpecError("model.mamba_head_dim", self.mamba_head_dim,
                            f"must divide 2 * model.hidden ({2 * self.hidden}) or set mamba_heads")
        if self.has_mamba and self.mamba_inner % self.mamba_groups:
            raise SpecError("model.mamba_groups", self.mamba_groups, f"must divide the Mamba inner width ({self.mamba_inner})")
        return self

    # --- which layer is which ---------------------------------------------------------------
    def _layer_args(self) -> tuple:
        return (self.layers, self.experts, self.layer_pattern, self.first_dense_layers, self.moe_layer_interval,
                self.sliding_window, self.global_attention_every)

    def layer_types(self) -> tuple[LayerType, ...]:
        """The kind of every layer (``teton.spec.layer_types``)."""
        return layer_types(*self._layer_args())

    def layer_type_counts(self) -> dict[LayerType, int]:
        """Layers of each kind, in the order the kinds first appear."""
        return dict(layer_type_counts(*self._layer_args()))

    @property
    def uniform(self) -> bool:
        """Every layer is the same kind."""
        return len(self.layer_type_counts()) == 1

    def as_layer(self, kind: LayerType) -> ModelSpec:
        """This model with every layer of ``kind``: what the workload builds one kind's block from.
        A dense kind of an MoE model keeps no experts; a Mamba- or MLP-only kind is a one-character
        pattern repeated."""
        update: dict = {"first_dense_layers": 0, "moe_layer_interval": 1, "global_attention_every": 0,
                        "sliding_window": self.sliding_window if kind.windowed else None, "mtp_depth": 0}
        if kind.ffn != "moe":
            update.update(experts=1, top_k=1, shared_experts=0, capacity_factor=None, pad_to_capacity=False,
                          moe_max_nodes=None)
        if kind.sub_blocks == 2:
            update["layer_pattern"] = None
        else:
            char = {("mamba", "none"): "M", ("attention", "none"): "*", ("none", "dense"): "-",
                    ("none", "moe"): "E"}[(kind.mixer, kind.ffn)]
            update["layer_pattern"] = char * self.layers
        return self.model_copy(update=update)

    @property
    def rotary(self) -> bool:
        """Q and K rotated by position: RoPE, or YaRN's scaled RoPE (``position_embedding``)."""
        return self.position_embedding in ("rope", "yarn")

    @property
    def has_moe(self) -> bool:
        """Some layer routes its tokens to experts."""
        return any(kind.ffn == "moe" for kind in self.layer_type_counts())

    @property
    def has_mamba(self) -> bool:
        return bool(self.layer_pattern) and "M" in self.layer_pattern

    @property
    def first_layer_type(self) -> LayerType:
        """The first layer's type: a uniform model's (or a kind's, :meth:`as_layer`) only one."""
        return self.layer_types()[0]

    @property
    def mixer(self) -> str:
        """The token mixer of a uniform model's layers (attention, mamba or none)."""
        return self.first_layer_type.mixer

    @property
    def ffn(self) -> str:
        """The feed-forward part of a uniform model's layers (dense, moe or none)."""
        return self.first_layer_type.ffn

    # --- derived sizes -------------------------------------------------------------------
    @property
    def n_kv_heads(self) -> int:
        return self.kv_heads or self.heads

    @property
    def cp_kv_heads(self) -> int:
        """The key / value heads an all-to-all CP splits: MLA's up-projected K and V, one per query
        head (Transformer Engine's context-parallel attention takes them as a GQA layer's), else
        the KV heads."""
        return self.heads if self.mla else self.n_kv_heads

    @property
    def mla(self) -> bool:
        """Multi-head latent attention (``kv_lora_rank`` given)."""
        return self.kv_lora_rank is not None

    @property
    def qk_head_dim(self) -> int:
        """Width of one query / key head in the attention core (MLA: no-RoPE part + RoPE part)."""
        return self.d_head + (self.qk_rope_head_dim if self.mla else 0)

    @property
    def v_dim(self) -> int:
        """Width of one value head."""
        return (self.v_head_dim or self.d_head) if self.mla else self.d_head

    @property
    def expert_ffn(self) -> int:
        """Width of one routed or shared expert."""
        return self.moe_ffn_hidden or self.ffn_hidden

    @property
    def mamba_inner(self) -> int:
        """d_inner of a Mamba-2 layer: heads x head dim (expand 2: 2 hidden by default)."""
        return (self.mamba_heads or 2 * self.hidden // self.mamba_head_dim) * self.mamba_head_dim

    @property
    def n_mamba_heads(self) -> int:
        return self.mamba_heads or 2 * self.hidden // self.mamba_head_dim

    @property
    def d_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def q_width(self) -> int:
        return self.heads * self.d_head

    @property
    def kv_width(self) -> int:
        return self.n_kv_heads * self.d_head

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices of size hidden x ffn per expert: gate, up, down (SwiGLU) or up, down."""
        return 3 if self.mlp == "swiglu" else 2

    def attention_params(self) -> int:
        """Q, K, V and output projections (GQA: ``kv_heads`` K and V heads). MLA (DeepSeek-V2,
        arXiv 2405.04434, Sec. 2.1; DeepSeek-V3's ``MLA`` module): Q down-projection to
        ``q_lora_rank`` + its norm + up-projection to ``heads x (head_dim + rope)``; a joint KV
        down-projection to ``kv_lora_rank + rope`` (the shared RoPE key) + its norm + up-projection
        to ``heads x (head_dim + v_head_dim)``; output from ``heads x v_head_dim``."""
        h = self.hidden
        if self.mla:
            qk, r = self.heads * self.qk_head_dim, self.kv_lora_rank
            q = h * qk if self.q_lora_rank is None else h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * qk
            kv = h * (r + self.qk_rope_head_dim) + r + r * self.heads * (self.d_head + self.v_dim)
            return q + kv + self.heads * self.v_dim * h
        q, kv = self.q_width, self.kv_width
        weights = h * q + 2 * h * kv + q * h
        biases = (q + 2 * kv + h) if self.bias else 0
        return weights + biases

    def mamba_params(self) -> int:
        """One Mamba-2 mixer (Dao & Gu 2024; Megatron-Core's ``MambaMixer``): in_proj to z, x, B, C
        and dt (``2 d_in + 2 G N + H``), the depthwise conv over x, B, C (weight and bias), per-head
        dt bias, A and D, the gated norm over d_in, out_proj from d_in."""
        h, d_in, heads = self.hidden, self.mamba_inner, self.n_mamba_heads
        bc = 2 * self.mamba_groups * self.mamba_state_dim
        return (h * (2 * d_in + bc + heads) + (d_in + bc) * (self.mamba_conv_kernel + 1) + 3 * heads + d_in
                + d_in * h)

    def mlp_params(self) -> int:
        """Parameters of one MLP: a dense layer's (``ffn_hidden``) or one expert's (``expert_ffn``)."""
        h, f = self.hidden, self.expert_ffn if self.experts > 1 else self.ffn_hidden
        biases = (f * (self.mlp_matrices - 1) + h) if self.bias else 0
        return self.mlp_matrices * h * f + biases

    def norm_params(self) -> int:
        return self.hidden * (2 if self.norm == "layernorm" else 1)

    def router_params(self) -> int:
        return self.hidden * self.experts if self.experts > 1 else 0

    def _mixer_params(self, kind: LayerType) -> int:
        return {"attention": self.attention_params, "mamba": self.mamba_params, "none": lambda: 0}[kind.mixer]()

    def _kind_params(self, kind: LayerType, active: bool) -> int:
        m = self.as_layer(kind)
        experts = (m.top_k if active else m.experts) + m.shared_experts if kind.ffn == "moe" else 1
        ffn = 0 if kind.ffn == "none" else experts * m.mlp_params() + m.router_params()
        return m._mixer_params(kind) + ffn + kind.sub_blocks * m.norm_params()

    def layer_params(self) -> int:
        """One layer of a uniform model: mixer + MLP (all experts, shared ones too) + router + norms."""
        return self._kind_params(self.first_layer_type, active=False)

    def layer_active_params(self) -> int:
        """Parameters a token touches in one layer of a uniform model (top_k + shared experts)."""
        return self._kind_params(self.first_layer_type, active=True)

    def layers_params(self, active: bool = False) -> int:
        """Every layer's parameters (or those a token touches), kind by kind."""
        return sum(n * self._kind_params(kind, active) for kind, n in self.layer_type_counts().items())

    def mtp_params(self, active: bool = False) -> int:
        """The multi-token prediction modules (DeepSeek-V3, arXiv 2412.19437, Sec. 2.2): each an
        embedding norm and a hidden norm, a ``2h -> h`` projection, one layer of the model's last
        kind and a final norm; the embedding and output head are shared with the main model."""
        if not self.mtp_depth:
            return 0
        layer = self._kind_params(self.layer_types()[-1], active)
        return self.mtp_depth * (layer + 2 * self.hidden * self.hidden + 3 * self.norm_params())

    def embedding_params(self) -> int:
        pos = self.max_seq_len * self.hidden if self.position_embedding == "learned" else 0
        return self.vocab * self.hidden + pos

    def head_params(self) -> int:
        """Output projection (0 when tied to the input embedding) plus the final norm."""
        return (0 if self.tied_embeddings else self.vocab * self.hidden) + self.norm_params()

    def total_params(self) -> int:
        """Every parameter, the multi-token prediction modules included."""
        return self.layers_params() + self.mtp_params() + self.embedding_params() + self.head_params()

    def matmul_params(self) -> int:
        """Active parameters that take part in a matmul per token (PaLM's N for 6N: excludes the
        input embedding lookup, includes the output projection, tied or not)."""
        return (self.layers_params(active=True) + self.mtp_params(active=True) + self.vocab * self.hidden
                + self.norm_params())


# the presets, re-exported (callers import them from here)
from teton.spec.model_presets import MODEL_PRESETS  # noqa: E402,F401
