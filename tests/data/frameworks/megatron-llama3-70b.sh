#!/bin/bash
# Llama 3 70B pretraining with Megatron-LM (Megatron-Core + Transformer Engine) on 16 nodes of
# 8 x H100: TP 8, PP 4 with 5 interleaved chunks per rank, sequence parallelism, the distributed
# optimizer with overlapped gradient reduce-scatter and parameter all-gather, TE's TP overlap,
# fp8 (hybrid) with per-tensor current scaling. Laid out as Megatron-LM's examples/ scripts are.

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=8
NUM_NODES=${NUM_NODES:-16}
CHECKPOINT_PATH=${CHECKPOINT_PATH:-/checkpoints/llama3-70b}
TOKENIZER_MODEL=meta-llama/Meta-Llama-3-70B
DATA_PATH=/data/llama3/dclm_text_document

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
    --rdzv_backend c10d
    --rdzv_endpoint ${MASTER_ADDR:-localhost}:29500
)

MODEL_ARGS=(
    --use-mcore-models
    --transformer-impl transformer_engine
    --num-layers 80
    --hidden-size 8192
    --ffn-hidden-size 28672
    --num-attention-heads 64
    --group-query-attention
    --num-query-groups 8
    --seq-length 8192
    --max-position-embeddings 8192
    --position-embedding-type rope
    --rotary-base 500000
    --normalization RMSNorm
    --swiglu
    --untie-embeddings-and-output-weights
    --disable-bias-linear
    --attention-dropout 0.0
    --hidden-dropout 0.0
    --init-method-std 0.02
    --attention-backend fused
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 128
    --train-iters 250000
    --lr 1.5e-4
    --min-lr 1.5e-5
    --lr-decay-style cosine
    --lr-warmup-iters 2000
    --weight-decay 0.1
    --adam-beta1 0.9
    --adam-beta2 0.95
    --clip-grad 1.0
    --bf16
    --fp8-format hybrid
    --fp8-recipe tensorwise
    --fp8-amax-history-len 1024
    --cross-entropy-loss-fusion
    --use-distributed-optimizer
    --overlap-grad-reduce
    --overlap-param-gather
    --manual-gc
)

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size 8
    --pipeline-model-parallel-size 4
    --num-layers-per-virtual-pipeline-stage 4
    --sequence-parallel
    --tp-comm-overlap
)

DATA_ARGS=(
    --data-path $DATA_PATH
    --tokenizer-type HuggingFaceTokenizer
    --tokenizer-model $TOKENIZER_MODEL
    --split 99,1,0
)

EVAL_AND_LOGGING_ARGS=(
    --log-interval 10
    --save-interval 1000
    --eval-interval 1000
    --eval-iters 10
    --save $CHECKPOINT_PATH
    --load $CHECKPOINT_PATH
    --tensorboard-dir $CHECKPOINT_PATH/tensorboard
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${MODEL_PARALLEL_ARGS[@]} \
    ${DATA_ARGS[@]} \
    ${EVAL_AND_LOGGING_ARGS[@]}
