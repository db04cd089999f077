"""The reference for `prod model merge-lora`: peft itself. Loads a prod model folder with
transformers, wraps it in a LoRA adapter made by peft (every projection, the head too when it
is untied, and ProD's special-token rows as trainable tokens) with random non-zero weights,
saves the adapter in peft's layout, merges it with peft's `merge_and_unload` and prints the
merged model's logits on the given ids as one JSON line.

usage: peft_reference.py BASE_DIR ADAPTER_OUT IDS_JSON SPECIAL_IDS_JSON [--rslora]
"""
import json
import sys

import torch
from peft import LoraConfig, get_peft_model, get_peft_model_state_dict
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM

base, out, ids, special = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
rslora = "--rslora" in sys.argv
torch.manual_seed(0)
model = AutoModelForCausalLM.from_pretrained(base, torch_dtype=torch.float32).eval()
targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
if not model.config.tie_word_embeddings:
    targets.append("lm_head")
cfg = LoraConfig(r=4, lora_alpha=12, target_modules=targets, use_rslora=rslora,
                 trainable_token_indices={"embed_tokens": special})
pm = get_peft_model(model, cfg)
with torch.no_grad():
    for n, p in pm.named_parameters():
        if "lora_" in n or "trainable_tokens_delta" in n:
            p.add_(torch.randn_like(p) * 0.2)
state = get_peft_model_state_dict(pm)
import os
os.makedirs(out, exist_ok=True)
save_file({k: v.contiguous() for k, v in state.items()}, os.path.join(out, "adapter_model.safetensors"),
          metadata={"format": "pt"})
pm.peft_config["default"].save_pretrained(out)
merged = pm.merge_and_unload()
with torch.no_grad():
    logits = merged(input_ids=torch.tensor([ids])).logits[0]
print(json.dumps({"logits": logits.tolist(), "keys": sorted(state)}))
