"""Teach the tiny model the verdict format, so in-process tests see parseable,
probabilistic outputs from a real model rather than noise."""

from __future__ import annotations

import random
from pathlib import Path

from judgegraph import PointwiseInput
from judgegraph._templates import generic_rubric, get_template


def teach_format(model_dir: Path, out_dir: Path, *, steps: int = 60, seed: int = 0) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    rng = random.Random(seed)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    template = get_template("pointwise-rubric")
    examples = []
    for i in range(256):
        item = PointwiseInput(instruction=f"question {rng.randint(0, 999)}", response=f"answer {i}")
        fields = {"instruction": item.instruction, "response": item.response, "rubric_text": generic_rubric((1, 5))}
        msgs = template.render(fields, scale=(1, 5), structured=False)
        prompt = tok.apply_chat_template(
            [{"role": m.role, "content": m.content} for m in msgs], add_generation_prompt=True, tokenize=False
        )
        # Skewed but not certain, so score distributions have real spread.
        score = rng.choices([1, 2, 3, 4, 5], weights=[1, 2, 4, 8, 3])[0]
        examples.append((prompt, f"Fine. [RESULT] {score}<|im_end|>"))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    for _ in range(steps):
        batch = rng.sample(examples, 12)
        ids, labels = [], []
        for prompt, target in batch:
            p = tok(prompt, add_special_tokens=False)["input_ids"]
            t = tok(target, add_special_tokens=False)["input_ids"]
            ids.append(p + t)
            labels.append([-100] * len(p) + t)
        width = max(len(x) for x in ids)
        pad = tok.pad_token_id
        input_ids = torch.tensor([x + [pad] * (width - len(x)) for x in ids])
        label_t = torch.tensor([y + [-100] * (width - len(y)) for y in labels])
        mask = (torch.arange(width)[None, :] < torch.tensor([len(x) for x in ids])[:, None]).long()
        loss = model(input_ids=input_ids, attention_mask=mask, labels=label_t).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return out_dir
