"""The example trainer's model: a small decoder-only transformer (GPT-style:
token and position embeddings, pre-norm blocks of causal self-attention and
an MLP, a tied output head) over llm.c token streams, small enough that a
short campaign trains in seconds on two CPU cores.

train_step() takes one batch as the Trainer service delivers it (a window
slice of B+1 tokens whose B pairs (t[i], t[i+1]) are the examples), and
takes one optimizer step per `step_tokens` pairs of it (each cut into
sequences of `context` tokens); it returns the mean loss over every pair of
the batch, each measured just before the step that learns from it.
"""

import dataclasses
import math

import torch
from torch import nn
from torch.nn import functional as F


@dataclasses.dataclass
class ModelConfig:
    vocab: int = 512        # token t is modelled as t % vocab
    context: int = 32
    d_model: int = 32
    n_layers: int = 2
    n_heads: int = 4
    lr: float = 3e-3
    # Token pairs per optimizer step: a delivered batch (16384 tokens in the
    # demo) is trained as several steps, so a short campaign learns.
    step_tokens: int = 1024


class CausalSelfAttention(nn.Module):

    def __init__(self, c):
        super().__init__()
        self.n_heads = c.n_heads
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model)
        self.proj = nn.Linear(c.d_model, c.d_model)
        mask = torch.tril(torch.ones(c.context, c.context, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, c.context, c.context), persistent=False)

    def forward(self, x):
        b, t, d = x.shape
        h = self.n_heads
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, h, d // h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // h)
        att = att.masked_fill(~self.mask[:, :, :t, :t], float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):

    def __init__(self, c):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(c.d_model), nn.LayerNorm(c.d_model)
        self.attn = CausalSelfAttention(c)
        self.mlp = nn.Sequential(nn.Linear(c.d_model, 4 * c.d_model), nn.GELU(),
                                 nn.Linear(4 * c.d_model, c.d_model))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class DecoderLM(nn.Module):

    def __init__(self, c):
        super().__init__()
        self.config = c
        self.tok = nn.Embedding(c.vocab, c.d_model)
        self.pos = nn.Embedding(c.context, c.d_model)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.n_layers))
        self.ln = nn.LayerNorm(c.d_model)
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.ln(x) @ self.tok.weight.t()  # tied output head


def batch_to_sequences(tokens, context, vocab):
    """(inputs, targets) of shape [n, context] for a batch's token pairs;
    the last sequence padded with targets -100 (ignored by the loss)."""
    tokens = tokens.long() % vocab
    x, y = tokens[:-1], tokens[1:]
    pad = (-len(x)) % context
    if pad:
        x = torch.cat([x, x.new_zeros(pad)])
        y = torch.cat([y, y.new_full((pad,), -100)])
    return x.view(-1, context), y.view(-1, context)


class Trainer:
    """Model and optimizer; state() / load_state() for checkpoints."""

    def __init__(self, config=ModelConfig(), device="cpu", seed=0):
        torch.manual_seed(seed)
        self.config, self.device = config, torch.device(device)
        self.model = DecoderLM(config).to(self.device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=config.lr, weight_decay=0.0)

    def loss(self, tokens):
        """Mean loss (nats) over the pairs of `tokens`, without learning."""
        self.model.eval()
        with torch.no_grad():
            x, y = batch_to_sequences(tokens, self.config.context, self.config.vocab)
            logits = self.model(x.to(self.device))
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), y.to(self.device).view(-1),
                                   ignore_index=-100).item()

    def train_step(self, tokens):
        """Trains on the batch (one optimizer step per step_tokens pairs);
        returns its mean loss (nats per pair), each part's before its step."""
        step = self.config.step_tokens
        total, pairs = 0.0, 0
        for s in range(0, len(tokens) - 1, step):
            part = tokens[s:s + step + 1]
            total += self._step(part) * (len(part) - 1)
            pairs += len(part) - 1
        return total / pairs

    def _step(self, tokens):
        self.model.train()
        x, y = batch_to_sequences(tokens, self.config.context, self.config.vocab)
        logits = self.model(x.to(self.device))
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.to(self.device).view(-1),
                               ignore_index=-100)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        return loss.item()

    def state(self):
        return {"config": dataclasses.asdict(self.config), "model": self.model.state_dict(),
                "opt": self.opt.state_dict()}

    def load_state(self, s):
        if s["config"] != dataclasses.asdict(self.config):
            raise ValueError("checkpoint of another model configuration: %s" % s["config"])
        self.model.load_state_dict(s["model"])
        self.opt.load_state_dict(s["opt"])

    def sync(self):
        """Waits for the device's queued work (the lease release)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
