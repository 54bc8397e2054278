#!/usr/bin/env python3
r"""A plain PyTorch reference of the Multi30k recipe's model (configs/multi30k_de_en.toml): the
baseline of scripts/bench/gpu.sh, which holds our trainer and search against it on one GPU.

The model is ours, written the way a PyTorch user would write it: nn.GRU (cuDNN on a GPU) for the
bidirectional encoder, a Python loop over nn.GRUCell for the decoder (input feeding, attention on
the new state, tied output layer applied once to all steps). The scorer is the recipe's additive
one, or, for training, dot, general or cosine (--attention), as ours computes them. It loads our
checkpoints of the recipe (`translate`) and follows our search rules, so its translations should
match `nmt translate`.

--compile trains as a PyTorch expert would speed the loop up: the decoder step under
torch.compile(mode="reduce-overhead", dynamic=True), which fuses its operations, compiles for
dynamic shapes, and replays them as CUDA graphs recorded per shape; each batch is padded to a
bucket (a multiple of 8 sentences and of 4 positions a side) so that shapes repeat, and every shape
of the timed batches is compiled and recorded before the clock starts.

  pip install torch sentencepiece
  gpu_reference.py train --vocab MODEL_DIR/vocab.joint.model --source train.de --target train.en \
      --batch-tokens 2000 --steps 100 --warmup 20 --device cuda [--attention dot] [--compile]
  gpu_reference.py translate --checkpoint MODEL_DIR/best.ckpt --input test.de --output hyp.en \
      --beam-size 5 --batch-size 64 --device cuda

Each prints one Markdown row in the columns of nmt_bench; the versions go to stderr.
"""
import argparse
import functools
import math
import random
import sys
import time

import sentencepiece
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

PAD, BOS, EOS = 0, 2, 3  # and <unk> 1
SCORERS = ("additive", "dot", "general", "cosine")
NORM_EPSILON = 1e-6  # ours: no 0/0 for an all-zero vector (cosine)


class Seq2Seq(nn.Module):
    def __init__(self, vocab_size, embedding=256, hidden=256, attention=256, dropout=0.3, scorer="additive"):
        super().__init__()
        self.scorer = scorer
        self.source_embedding = nn.Embedding(vocab_size, embedding, padding_idx=PAD)
        self.encoder = nn.GRU(embedding, hidden, batch_first=True, bidirectional=True)
        self.target_embedding = nn.Embedding(vocab_size, embedding, padding_idx=PAD)  # tied to the output
        self.bridge = nn.Linear(2 * hidden, hidden)
        self.cell = nn.GRUCell(embedding + hidden, hidden)  # input: [embedding, previous attentional]
        if scorer == "additive":  # v^T tanh(W_q s + W_k h_j + b)
            self.query_layer = nn.Linear(hidden, attention, bias=False)
            self.key_layer = nn.Linear(2 * hidden, attention)
            self.energy_layer = nn.Linear(attention, 1, bias=False)
        else:  # s^T k_j with the states mapped to the state's size (ours: key_map or key_layer, bias-free)
            self.key_layer = nn.Linear(2 * hidden, hidden, bias=False)
        if scorer == "cosine":  # beta cos(s, k_j), beta learned as log beta from 10
            self.log_sharpness = nn.Parameter(torch.full((1,), math.log(10.0)))
        self.combine = nn.Linear(3 * hidden, hidden, bias=False)
        self.output_bias = nn.Parameter(torch.zeros(vocab_size))
        self.dropout = nn.Dropout(dropout)
        for table in (self.source_embedding, self.target_embedding):
            with torch.no_grad():
                table.weight.uniform_(-0.1, 0.1)
                table.weight[PAD].zero_()

    def encode(self, source, lengths):
        """source [B, S], lengths [B] on the CPU -> states [B, S, 2H], keys [B, S, A], mask, h0, a0."""
        embedded = self.dropout(self.source_embedding(source))
        packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
        packed_states, final = self.encoder(packed)
        states, _ = pad_packed_sequence(packed_states, batch_first=True, total_length=source.size(1))
        hidden = torch.tanh(self.bridge(torch.cat([final[0], final[1]], dim=1)))
        attentional = hidden.new_zeros(hidden.shape)
        keys = self.key_layer(states)
        if self.scorer == "cosine":
            keys = keys / keys.norm(dim=2, keepdim=True).clamp_min(NORM_EPSILON)
        return (states, keys, source != PAD), hidden, attentional

    def energy(self, hidden, keys):
        """The scores [B, S] of the new state [B, H] against the keys [B, S, K]."""
        if self.scorer == "additive":
            return self.energy_layer(torch.tanh(self.query_layer(hidden).unsqueeze(1) + keys)).squeeze(2)
        if self.scorer == "cosine":
            hidden = hidden / hidden.norm(dim=1, keepdim=True).clamp_min(NORM_EPSILON)
        scores = torch.bmm(keys, hidden.unsqueeze(2)).squeeze(2)
        return scores * self.log_sharpness.exp() if self.scorer == "cosine" else scores

    def step(self, embedded, hidden, attentional, encoded):
        """One decoder step: the new GRU state and attentional vector, both [B, H]."""
        states, keys, mask = encoded
        hidden = self.cell(torch.cat([embedded, attentional], dim=1), hidden)
        weights = self.energy(hidden, keys).masked_fill(~mask, float("-inf")).softmax(dim=1)  # [B, S]
        context = torch.bmm(weights.unsqueeze(1), states).squeeze(1)  # [B, 2H]
        attentional = self.dropout(torch.tanh(self.combine(torch.cat([hidden, context], dim=1))))
        return hidden, attentional

    def logits(self, attentional):
        return F.linear(attentional, self.target_embedding.weight, self.output_bias)

    def forward(self, source, lengths, target_input):
        encoded, hidden, attentional = self.encode(source, lengths)
        embedded = self.dropout(self.target_embedding(target_input))
        outputs = []
        for t in range(target_input.size(1)):
            hidden, attentional = self.step(embedded[:, t], hidden, attentional, encoded)
            outputs.append(attentional)
        return self.logits(torch.stack(outputs, dim=1))  # [B, T, V]


def load_checkpoint(path, device):
    """Our LibTorch checkpoint -> (Seq2Seq in eval mode, source and target sentencepiece)."""
    archive = torch.jit.load(path, map_location=device)
    tensors = dict(archive.named_parameters())
    tensors.update(archive.named_buffers())

    def get(name):
        if name not in tensors:
            sys.exit(f"{path}: no tensor {name}: not a checkpoint of the recipe's model "
                     "(one layer each side, additive attention, tied embeddings)")
        return tensors[name].detach()

    def vocabulary(name):
        return sentencepiece.SentencePieceProcessor(model_proto=bytes(get(name).cpu().tolist()))

    decoder = "model.decoder."
    vocab_size, embedding = get(decoder + "embedding.weight").shape
    model = Seq2Seq(vocab_size, embedding, get(decoder + "bridge.weight").shape[0],
                    get(decoder + "attention.scorer.query_layer.weight").shape[0]).to(device)
    state = {f"encoder.{name}": get(f"model.encoder.rnn.{name}") for name, _ in model.encoder.named_parameters()}
    state.update({
        "source_embedding.weight": get("model.encoder.embedding.weight"),
        "target_embedding.weight": get(decoder + "embedding.weight"),
        "bridge.weight": get(decoder + "bridge.weight"), "bridge.bias": get(decoder + "bridge.bias"),
        "cell.weight_ih": torch.cat([get(decoder + "embedding_gates.weight"), get(decoder + "feed_gates.weight")], 1),
        "cell.bias_ih": get(decoder + "embedding_gates.bias"),
        "cell.weight_hh": get(decoder + "cells.0.weight_hh"), "cell.bias_hh": get(decoder + "cells.0.bias_hh"),
        "query_layer.weight": get(decoder + "attention.scorer.query_layer.weight"),
        "key_layer.weight": get(decoder + "attention.scorer.key_layer.weight"),
        "key_layer.bias": get(decoder + "attention.scorer.key_layer.bias"),
        "energy_layer.weight": get(decoder + "attention.scorer.energy_layer.weight"),
        "combine.weight": get(decoder + "combine.weight"),
        "output_bias": get(decoder + "output_bias"),
    })
    for name, parameter in model.named_parameters():
        if state[name].shape != parameter.shape:
            sys.exit(f"{path}: {name} has shape {tuple(state[name].shape)}, expected {tuple(parameter.shape)}")
    model.load_state_dict(state)
    return model.eval(), vocabulary("source_vocabulary"), vocabulary("target_vocabulary")


def pad(sequences, multiple=1):
    """Lists of ids -> [B, max length] int64, padded with PAD, and the lengths [B]; the length
    rounded up to a multiple of `multiple`."""
    length = -(-max(map(len, sequences)) // multiple) * multiple
    padded = torch.full((len(sequences), length), PAD, dtype=torch.long)
    for row, sequence in enumerate(sequences):
        padded[row, :len(sequence)] = torch.tensor(sequence)
    return padded, torch.tensor([len(s) for s in sequences])


def bucket_rows(sources, targets, multiple):
    """The rows padded to a multiple of `multiple` with sentences that weigh nothing: an empty source
    (EOS alone, once update() ends it) and an empty target (only PAD, which the loss ignores)."""
    missing = -len(sources) % multiple
    return sources + [[]] * missing, targets + [[]] * missing


def make_batches(pairs, batch_tokens, rng):
    """Our make_batches: shuffle, sort windows of ~100 batches by length, cut, shuffle the batches."""
    order = list(range(len(pairs)))
    rng.shuffle(order)
    mean_tokens = max(1, sum(len(s) + len(t) + 2 for s, t in pairs) // len(pairs))
    window = max(1, 100 * batch_tokens // mean_tokens)
    batches = []
    for begin in range(0, len(order), window):
        chunk = sorted(order[begin:begin + window], key=lambda i: (len(pairs[i][0]), len(pairs[i][1]), i))
        batch, longest_source, longest_target = [], 0, 0
        for i in chunk:
            source, target = len(pairs[i][0]) + 1, len(pairs[i][1]) + 1
            if batch and (len(batch) + 1) * (max(longest_source, source) + max(longest_target, target)) > batch_tokens:
                batches.append(batch)
                batch, longest_source, longest_target = [], 0, 0
            batch.append(i)
            longest_source, longest_target = max(longest_source, source), max(longest_target, target)
        batches.append(batch)
    rng.shuffle(batches)
    return batches


def train(args):
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    vocabulary = sentencepiece.SentencePieceProcessor(model_file=args.vocab)
    sources, targets = (vocabulary.encode(read_lines(path)) for path in (args.source, args.target))
    fits = lambda ids: 0 < len(ids) <= args.max_length
    pairs = [(s, t) for s, t in zip(sources, targets) if fits(s) and fits(t)]
    batches = make_batches(pairs, args.batch_tokens, random.Random(args.seed))
    if args.warmup + args.steps > len(batches):
        sys.exit(f"--steps + --warmup exceed the {len(batches)} batches of one epoch")
    model = Seq2Seq(vocabulary.get_piece_size(), dropout=args.dropout, scorer=args.attention).to(device).train()
    if args.compile:
        model.step = torch.compile(model.step, mode="reduce-overhead", dynamic=True)
    rows, positions = (8, 4) if args.compile else (1, 1)
    # Adam's defaults: on CUDA that is the foreach (multi-tensor) implementation, not fused=True.
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)

    def update(batch):
        if args.compile:
            torch.compiler.cudagraph_mark_step_begin()  # a new update: the last one's graph outputs are spent
        sources, targets = bucket_rows([pairs[i][0] for i in batch], [pairs[i][1] for i in batch], rows)
        source, lengths = pad([s + [EOS] for s in sources], positions)
        target_input, _ = pad([[BOS] + t for t in targets], positions)
        target_output, _ = pad([t + [EOS] if t else [] for t in targets], positions)
        target_output = F.pad(target_output, (0, target_input.size(1) - target_output.size(1)), value=PAD)
        source, target_input, target_output = (x.to(device) for x in (source, target_input, target_output))
        logits = model(source, lengths, target_input)
        loss = F.cross_entropy(logits.flatten(0, 1), target_output.flatten(), ignore_index=PAD,
                               label_smoothing=0.1, reduction="sum") / sum(len(pairs[i][1]) + 1 for i in batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss.detach()  # no .item(): the host does not wait for the GPU

    timed = batches[args.warmup:args.warmup + args.steps]
    losses = [update(batch) for batch in batches[:args.warmup]]
    if args.compile:  # every shape the timed batches have, compiled and recorded before the clock
        compiled = time.perf_counter()
        for batch in timed:
            update(batch)
        print(f"compiled and recorded in {time.perf_counter() - compiled:.0f} s", file=sys.stderr)
    timed_losses, seconds = clock(device, lambda: [update(batch) for batch in timed])
    sentences = sum(len(batch) for batch in timed)
    target_tokens = sum(len(pairs[i][1]) + 1 for batch in timed for i in batch)
    losses = torch.stack(losses + timed_losses).tolist()
    tail = max(1, min(10, len(losses) // 2))
    print(f"loss per target token: first {tail} updates {sum(losses[:tail]) / tail:.3f}, "
          f"last {tail} {sum(losses[-tail:]) / tail:.3f}, mean {sum(losses) / len(losses):.3f}", file=sys.stderr)
    setting = (f"{args.steps} steps, {sentences // args.steps} sentences/batch, {args.batch_tokens} tokens a batch, "
               f"{args.attention}, {device_name(device)}")
    what = "reference training (PyTorch, torch.compile reduce-overhead)" if args.compile else "reference training (PyTorch)"
    print_row(what, setting, sentences / seconds, target_tokens / seconds)


def output_cap(source_length):
    """Our max_output_length: 2 x the source length (EOS included) + 10 tokens, at most 250."""
    return max(1, min(int(2.0 * source_length) + 10, 250))


def length_penalty(length, alpha=1.0):
    """GNMT lp = ((5 + |Y|) / 6)^alpha, |Y| counting EOS."""
    return ((5.0 + length) / 6.0) ** alpha


def next_log_probs(model, previous, hidden, attentional, encoded):
    hidden, attentional = model.step(model.target_embedding(previous), hidden, attentional, encoded)
    log_probs = model.logits(attentional).log_softmax(dim=1)
    log_probs[:, [PAD, BOS]] = float("-inf")
    return log_probs, hidden, attentional


def greedy_search(model, source, lengths, caps):
    encoded, hidden, attentional = model.encode(source, lengths)
    cap = torch.tensor(caps, device=source.device)
    previous = torch.full((source.size(0),), BOS, device=source.device)
    finished = torch.zeros(source.size(0), dtype=torch.bool, device=source.device)
    steps = []
    for t in range(max(caps)):
        log_probs, hidden, attentional = next_log_probs(model, previous, hidden, attentional, encoded)
        previous = log_probs.argmax(dim=1).masked_fill(finished, PAD)
        steps.append(previous)
        finished |= (previous == EOS) | (cap <= t + 1)
        if finished.all():
            break
    rows = torch.stack(steps, dim=1).tolist()
    return [row[:next((t for t, token in enumerate(row) if token in (EOS, PAD)), len(row))] for row in rows]


def beam_search(model, source, lengths, caps, beam):
    """Our batched beam search; finished sentences leave the batch. Returns the best tokens per sentence."""
    device, vocab_size = source.device, model.output_bias.numel()
    encoded, hidden, attentional = model.encode(source, lengths)
    rows = torch.arange(source.size(0), device=device).repeat_interleave(beam)  # sentence b: rows bK .. bK+K-1
    encoded = tuple(x.index_select(0, rows) for x in encoded)
    hidden, attentional = hidden.index_select(0, rows), attentional.index_select(0, rows)
    active = list(range(source.size(0)))
    scores = [0.0 if k == 0 else -math.inf for _ in active for k in range(beam)]  # only beam 0 starts alive
    histories = [[] for _ in scores]
    previous = torch.full((len(scores),), BOS, device=device)
    finished = [[] for _ in active]  # (normalized score, tokens) of each sentence
    for length in range(1, max(caps) + 1):
        log_probs, hidden, attentional = next_log_probs(model, previous, hidden, attentional, encoded)
        totals = log_probs.double() + torch.tensor(scores, dtype=torch.float64, device=device).unsqueeze(1)
        top_scores, top_ids = totals.view(len(active), -1).topk(2 * beam, dim=1)
        top_scores, top_ids = top_scores.tolist(), top_ids.tolist()
        beams, kept_rows, next_active = [], [], []  # beams: (origin row, token, score) of the next step's rows
        for a, sentence in enumerate(active):
            at_cap = length >= caps[sentence]
            alive = []  # (row, token, score) of the K best extensions that go on
            for j, (score, index) in enumerate(zip(top_scores[a], top_ids[a])):
                if score == -math.inf or len(alive) == beam:
                    break
                row, token = a * beam + index // vocab_size, index % vocab_size
                if token == EOS or at_cap:
                    if j < beam:  # only an extension ranked in the top K finishes
                        tokens_out = histories[row] + ([] if token == EOS else [token])
                        finished[sentence].append((score / length_penalty(length), tokens_out))
                else:
                    alive.append((row, token, score))
            done = finished[sentence]
            if at_cap or not alive or len(done) >= beam or (
                    done and max(s for s, _ in done) >= alive[0][2] / length_penalty(caps[sentence])):
                continue  # done (the last test: no alive beam can still beat the best finished one)
            next_active.append(sentence)
            kept_rows += range(a * beam, (a + 1) * beam)
            beams += alive + [(*alive[0][:2], -math.inf)] * (beam - len(alive))  # fewer than K: copies at -inf
        if not next_active:
            break
        origin, tokens, scores = (list(column) for column in zip(*beams))
        index = torch.tensor(origin, device=device)
        hidden, attentional = hidden.index_select(0, index), attentional.index_select(0, index)
        if len(next_active) != len(active):
            encoded = tuple(x.index_select(0, torch.tensor(kept_rows, device=device)) for x in encoded)
        histories = [histories[row] + [token] for row, token in zip(origin, tokens)]
        active, previous = next_active, torch.tensor(tokens, device=device)
    return [max(hypotheses, key=lambda h: h[0], default=(0.0, []))[1] for hypotheses in finished]


@torch.inference_mode()
def translate_lines(model, source_vocabulary, target_vocabulary, lines, beam, batch_size, device):
    """Translations of `lines` (empty in, empty out) and the target tokens produced (EOS included)."""
    sources = [source_vocabulary.encode(line) for line in lines]
    order = sorted((i for i, s in enumerate(sources) if s), key=lambda i: -len(sources[i]))  # longest first
    outputs, target_tokens = [""] * len(lines), 0
    for begin in range(0, len(order), batch_size):
        batch = order[begin:begin + batch_size]
        source, lengths = pad([sources[i] + [EOS] for i in batch])
        caps = [output_cap(length) for length in lengths.tolist()]
        source = source.to(device)
        if beam == 1:
            best = greedy_search(model, source, lengths, caps)
        else:
            best = beam_search(model, source, lengths, caps, beam)
        for i, tokens in zip(batch, best):
            outputs[i] = target_vocabulary.decode(tokens)
            target_tokens += len(tokens) + 1
    return outputs, target_tokens


def translate(args):
    device = torch.device(args.device)
    model, source_vocabulary, target_vocabulary = load_checkpoint(args.checkpoint, device)
    lines = read_lines(args.input)
    run = functools.partial(translate_lines, model, source_vocabulary, target_vocabulary,
                            beam=args.beam_size, batch_size=args.batch_size, device=device)
    run(lines[:100])  # warm-up
    (outputs, target_tokens), seconds = clock(device, lambda: run(lines))
    with open(args.output, "w", encoding="utf-8") as file:
        file.writelines(line + "\n" for line in outputs)
    search = "greedy" if args.beam_size == 1 else f"beam {args.beam_size}"
    setting = f"{len(lines)} sentences, batch {args.batch_size} sentences, {device_name(device)}"
    print_row(f"reference translation, {search} (PyTorch)", setting, len(lines) / seconds, target_tokens / seconds)


def read_lines(path):
    with open(path, encoding="utf-8") as file:
        return [line.rstrip("\r\n") for line in file]


def clock(device, work):
    """work()'s result and seconds, the GPU's queued work included."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    result = work()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return result, time.perf_counter() - start


def device_name(device):
    return f"cuda {torch.cuda.get_device_name(device)}" if device.type == "cuda" else "cpu"


def print_row(what, setting, sentences_per_second, tokens_per_second):
    print(f"| {what} | {setting} | {sentences_per_second:.1f} | {tokens_per_second:.0f} | - | - | - | - |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    trainer = commands.add_parser("train", help="time training updates of a randomly initialized model")
    trainer.set_defaults(run=train)
    trainer.add_argument("--vocab", required=True, help="sentencepiece model (ours: MODEL_DIR/vocab.joint.model)")
    trainer.add_argument("--source", required=True, help="training source text, one sentence a line")
    trainer.add_argument("--target", required=True, help="training target text, one sentence a line")
    trainer.add_argument("--batch-tokens", type=int, default=2000, help="padded source + target tokens a batch")
    trainer.add_argument("--steps", type=int, default=100, help="timed updates")
    trainer.add_argument("--warmup", type=int, default=20, help="updates before the clock starts")
    trainer.add_argument("--max-length", type=int, default=80, help="longest pair kept, in subwords a side")
    trainer.add_argument("--dropout", type=float, default=0.3)
    trainer.add_argument("--seed", type=int, default=1)
    trainer.add_argument("--attention", choices=SCORERS, default="additive", help="the scorer")
    trainer.add_argument("--compile", action="store_true",
                         help="the decoder step under torch.compile(mode='reduce-overhead'), batches in buckets")
    translator = commands.add_parser("translate", help="translate a file with one of our checkpoints, timed")
    translator.set_defaults(run=translate)
    translator.add_argument("--checkpoint", required=True, help="our checkpoint (MODEL_DIR/best.ckpt)")
    translator.add_argument("--input", required=True, help="source text, one sentence a line")
    translator.add_argument("--output", required=True, help="where the translations go, one a line")
    translator.add_argument("--beam-size", type=int, default=5, help="1: greedy")
    translator.add_argument("--batch-size", type=int, default=64, help="sentences a batch")
    for command in (trainer, translator):
        command.add_argument("--device", default="cuda", help="cuda or cpu")
    args = parser.parse_args()
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    print(f"torch {torch.__version__}, cuDNN {cudnn}", file=sys.stderr)
    args.run(args)


if __name__ == "__main__":
    main()
