"""Hugging Face models built from small configs, unmodified, with an
external loss on their logits ($HF: gpt2, bert (with a padding mask),
llama, lora (peft LoRA on GPT-2's attention, with LoRA dropout)), or
returning their own loss ($HF=gpt2_labels: labels=..., as HF training
loops call them; the eval step then gives the batch's loss)."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
import transformers as T

import trainstep

VOCAB, BATCH, SEQ = 64, 2, 8


class WithLabels(nn.Module):
    """The model's own output object, loss and logits, given labels (no KV
    cache: a DynamicCache in the output is refused, naming it)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, labels):
        return self.model(input_ids=ids, labels=labels, use_cache=False)


class LM(nn.Module):
    """logits of a transformers model: [batch, seq, vocab]."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, mask=None):
        return self.model(input_ids=ids, attention_mask=mask).logits


def _model(name):
    if name in ("gpt2", "lora", "gpt2_labels"):
        m = T.GPT2LMHeadModel(T.GPT2Config(vocab_size=VOCAB, n_positions=16, n_embd=32, n_layer=2,
                                           n_head=2, bos_token_id=0, eos_token_id=0))
        if name == "lora":
            from peft import LoraConfig, get_peft_model
            m = get_peft_model(m, LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"],
                                             lora_dropout=0.1))
        return m
    if name == "llama":
        return T.LlamaForCausalLM(T.LlamaConfig(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16))
    if name == "bert":
        return T.BertForMaskedLM(T.BertConfig(
            vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=16))
    raise ValueError(f"HF={name!r}")


def loss_fn(logits, y):
    return F.cross_entropy(logits.transpose(1, 2), y)


def build():
    name = os.environ.get("HF", "gpt2")
    torch.manual_seed(0)
    if name == "gpt2_labels":
        model = WithLabels(_model(name))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        ids = torch.randint(0, VOCAB, (BATCH, SEQ))
        return trainstep.TrainSpec(model, lambda out, y: out.loss, opt, (ids, ids), ids,
                                   name="hf_gpt2_labels")
    model = LM(_model(name))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    y = torch.randint(0, VOCAB, (BATCH, SEQ))
    inputs = (ids,)
    if name == "bert":  # the second sequence ends in padding
        mask = torch.ones(BATCH, SEQ, dtype=torch.long)
        mask[1, 6:] = 0
        inputs = (ids, mask)
    return trainstep.TrainSpec(model, loss_fn, opt, inputs, y, name=f"hf_{name}")
