#!/usr/bin/env python3
"""Run DeepSeek's reference forward pass (inference/model.py with the torch port of kernel.py, the
recipe of ../shared/golden) on a ds4 checkpoint, and time prefill and decode.

    run_ref.py --model DIR [--device cuda|cpu] [--prefill N] [--context C] [--decode M]
               [--kernels port|cublas|both] [--check GOLDEN]

The reference files are not in this repository: they are read from --ref (default
<repo>/.devbin/ref, see bench/reference/README.md). The checkpoint is ours (synth, or the golden
tiny one): its tensor names are the reference's own; loading applies what convert.py and the
model do (wo_a dequantised to bf16, head and ratio-2 compressor held in fp32, experts' I8 bytes
viewed as packed e2m1). The Engram token map comes from DIR/engram_token_map.safetensors.

Timing: a warm-up (a --warmup-prefill token prefill, 32 by default, and two decode steps), then one prefill of N
tokens, then a prefill of C tokens (if C != N) and M greedy decode steps from there; every figure
is bracketed by torch.cuda.synchronize(). One JSON line per kernel mode goes to stdout:

    {"kernels": "port", "prefill_tokens": N, "prefill_tok_s": .., "decode_context": C,
     "decode_steps": M, "decode_tok_s": .., "device": "NVIDIA H200", ...}

Kernel modes (the GEMMs only; act_quant, fp4_act_quant, sparse_attn and hc_split_sinkhorn are
always the port's):
  port    the vendored kernel_cpu.py as is: exactly how the golden data was made (each fp8/fp4
          GEMM as a loop over 32-wide K blocks, fp32 partial products).
  cublas  fp8_gemm/fp4_gemm as one cuBLAS bf16 GEMM on operands dequantised on every call
          (e4m3/e2m1 times power-of-two scales are exact in bf16; fp32 accumulation), i.e.
          "cuBLAS bf16 on dequantised weights". Same products, other summation order.

--check GOLDEN compares with a golden file of ../shared/golden (testdata/tiny/golden.safetensors,
with --model testdata/tiny) block-locally, as that folder's README prescribes: every block is fed
the golden input stream and pre mix, the decode steps the golden tokens; selections (gate, index
top-k) and streams, Engram outputs and logits are compared, and one JSON line says pass or fail.

Bad input exits 2 with one line on stderr; an internal error exits 1 with its traceback.
"""

import argparse
import contextlib
import dataclasses
import importlib
import json
import math
import os
import struct
import sys
import time
import traceback
import types

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = "deepseek_v41"


class BadInput(Exception):
    """A problem with what we were given (files, tensors, flags): one line, exit 2."""


# ---------------------------------------------------------------------------------------------
# safetensors, without the safetensors package (the device machine may lack it)

ST_DTYPES = {  # safetensors dtype -> (torch dtype name, bytes per element)
    "BF16": ("bfloat16", 2),
    "F16": ("float16", 2),
    "F32": ("float32", 4),
    "F64": ("float64", 8),
    "I8": ("int8", 1),
    "U8": ("uint8", 1),
    "I16": ("int16", 2),
    "I32": ("int32", 4),
    "I64": ("int64", 8),
    "BOOL": ("bool", 1),
    "F8_E4M3": ("float8_e4m3fn", 1),
    "F8_E8M0": ("float8_e8m0fnu", 1),
}


class SafeTensors:
    """One .safetensors file: its header, and each tensor's bytes read on demand."""

    def __init__(self, path):
        self.path = path
        try:
            with open(path, "rb") as f:
                head = f.read(8)
                if len(head) != 8:
                    raise BadInput(f"{path}: shorter than a safetensors header")
                (n,) = struct.unpack("<Q", head)
                if n > 100 << 20:
                    raise BadInput(f"{path}: header length {n} is not plausible")
                header = json.loads(f.read(n))
            size = os.path.getsize(path)
        except OSError as e:
            raise BadInput(f"{path}: {e.strerror}") from None
        except (ValueError, UnicodeDecodeError) as e:
            raise BadInput(f"{path}: header is not JSON: {e}") from None
        self.metadata = header.pop("__metadata__", None) or {}
        self.base = 8 + n
        self.tensors = {}
        for name, info in header.items():
            try:
                dtype, shape, (s, e) = info["dtype"], [int(d) for d in info["shape"]], info["data_offsets"]
            except (KeyError, TypeError, ValueError):
                raise BadInput(f"{path}: tensor {name}: malformed header entry") from None
            if dtype not in ST_DTYPES:
                raise BadInput(f"{path}: tensor {name}: dtype {dtype} not supported")
            want = math.prod(shape) * ST_DTYPES[dtype][1]
            if e - s != want or s < 0 or self.base + e > size:
                raise BadInput(f"{path}: tensor {name}: data_offsets [{s}, {e}] do not hold {dtype} {shape}")
            self.tensors[name] = (dtype, shape, s, e)
        self._fd = None

    def raw(self, torch, name):
        """The tensor's bytes as a CPU uint8 tensor (read with pread, so threads can overlap)."""
        _, _, s, e = self.tensors[name]
        n = e - s
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY)
        buf = bytearray(n)
        view = memoryview(buf)
        done = 0
        while done < n:
            got = os.preadv(self._fd, [view[done:]], self.base + s + done)
            if got <= 0:
                raise BadInput(f"{self.path}: tensor {name}: short read")
            done += got
        if n == 0:
            return torch.empty(0, dtype=torch.uint8, device="cpu")
        return torch.frombuffer(buf, dtype=torch.uint8)

    def get(self, torch, name):
        """The tensor in its own dtype and shape, on the CPU."""
        dtype, shape, _, _ = self.tensors[name]
        t = self.raw(torch, name)
        return t.view(getattr(torch, ST_DTYPES[dtype][0])).reshape(shape)


def checkpoint_tensors(model_dir):
    """name -> SafeTensors file holding it, from model.safetensors.index.json or the shards."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    files = []
    if os.path.exists(index):
        try:
            with open(index) as f:
                wm = json.load(f)["weight_map"]
        except (OSError, ValueError, KeyError) as e:
            raise BadInput(f"{index}: no weight_map ({e})") from None
        files = sorted(set(wm.values()))
    else:
        files = sorted(f for f in os.listdir(model_dir) if f.startswith("model") and f.endswith(".safetensors"))
    if not files:
        raise BadInput(f"{model_dir}: no model*.safetensors shards")
    where = {}
    for fn in files:
        st = SafeTensors(os.path.join(model_dir, fn))
        for name in st.tensors:
            if name in where:
                raise BadInput(f"{model_dir}: tensor {name} is in {where[name].path} and {st.path}")
            where[name] = st
    return where


# ---------------------------------------------------------------------------------------------
# the reference package


def import_reference(ref_root):
    """Import <ref_root>/deepseek_v41 as a package. vision.py and image_processor.py are only
    imported for names the text path never calls (vision_n_layers 0); where they are absent,
    stand-ins provide those names."""
    pkg_dir = os.path.join(ref_root, PKG)
    for f in ("model.py", "kernel_cpu.py", "engram.py"):
        if not os.path.exists(os.path.join(pkg_dir, f)):
            raise BadInput(f"{pkg_dir}/{f}: missing (bench/reference/README.md says how to get the reference)")
    if ref_root not in sys.path:
        sys.path.insert(0, ref_root)
    pkg = importlib.import_module(PKG)
    if not os.path.exists(os.path.join(pkg_dir, "image_processor.py")):
        ip = types.ModuleType(PKG + ".image_processor")
        ip.IMAGE, ip.IMAGE_END, ip.IMAGE_NEW_LINE, ip.IMAGE_START = 0, 1, 2, 3
        sys.modules[ip.__name__] = ip
        pkg.image_processor = ip
    if not os.path.exists(os.path.join(pkg_dir, "vision.py")):
        vi = types.ModuleType(PKG + ".vision")

        class _NoVision:
            def __init__(self, *a, **k):
                raise BadInput("this harness runs the text model only (vision_n_layers must be 0)")

        vi.Aligner = vi.ViT = _NoVision
        sys.modules[vi.__name__] = vi
        pkg.vision = vi
    try:
        kernel = importlib.import_module(PKG + ".kernel_cpu")
        engram = importlib.import_module(PKG + ".engram")
        model = importlib.import_module(PKG + ".model")
    except ImportError as e:
        raise BadInput(f"{pkg_dir}: the reference needs {e.name} ({e})") from None
    return model, kernel, engram


def model_args(M, model_dir, max_batch, max_seq):
    path = os.path.join(model_dir, "config.json")
    try:
        with open(path) as f:
            cfg = json.load(f)
    except OSError as e:
        raise BadInput(f"{path}: {e.strerror}") from None
    except ValueError as e:
        raise BadInput(f"{path}: not JSON: {e}") from None
    if not isinstance(cfg, dict):
        raise BadInput(f"{path}: not a JSON object")
    if "text_config" in cfg:
        raise BadInput(f"{path}: a Hugging Face config; give the flat inference config (ModelArgs keys)")
    fields = {f.name: f for f in dataclasses.fields(M.ModelArgs)}
    kw, ignored = {}, []
    for k, v in cfg.items():
        if k not in fields:
            ignored.append(k)
            continue
        kw[k] = tuple(v) if isinstance(v, list) else v
    if ignored:
        log(f"config keys the reference does not know, ignored: {', '.join(sorted(ignored))}")
    kw.update(max_batch_size=max_batch, max_seq_len=max_seq, temperature=0)
    if kw.get("vision_n_layers", 0):
        raise BadInput(f"{path}: vision_n_layers is {kw['vision_n_layers']}; this harness runs the text model only")
    try:
        return M.ModelArgs(**kw)
    except TypeError as e:
        raise BadInput(f"{path}: {e}") from None


def patch_reference(torch, M, E, model_dir, args):
    """The two changes of the golden recipe, made from outside the vendored files:
    * the Engram token map from engram_token_map.safetensors instead of a tokenizer;
    * the decode patch (spec §8.1): every index-key owner scores against its own key cache on
      every call (the unpatched reference keeps the last owner's keys on steps where a ratio-2
      owner's compressor emits nothing)."""
    tm_path = os.path.join(model_dir, "engram_token_map.safetensors")

    def token_map_from_file(_tokenizer):
        st = SafeTensors(tm_path)
        if "token_map" not in st.tensors:
            raise BadInput(f"{tm_path}: no tensor token_map")
        with cpu_device(torch):
            tm = st.get(torch, "token_map").long()
        if tm.dim() != 1 or tm.numel() != args.vocab_size:
            raise BadInput(f"{tm_path}: token_map has shape {list(tm.shape)}, want [{args.vocab_size}]")
        cv = args.engram_compressed_vocab_size
        md = st.metadata.get("compressed_vocab_size")
        if md is not None and int(md) != cv:
            raise BadInput(f"{tm_path}: compressed_vocab_size {md} differs from the config's {cv}")
        if tm.numel() and (int(tm.min()) < 0 or int(tm.max()) >= cv):
            raise BadInput(f"{tm_path}: token_map values outside [0, {cv})")
        return tm.tolist(), cv

    E.build_compressed_token_map = token_map_from_file

    original = M.Indexer.forward
    if getattr(original, "_ds4_decode_patch", False):
        return

    def forward(self, x, qr, latent, start_pos, offset):
        if self.owns_k:
            M.shared_attn.index_k = self.k_cache
        return original(self, x, qr, latent, start_pos, offset)

    forward._ds4_decode_patch = True
    M.Indexer.forward = forward


def cpu_device(torch):
    """A context that makes factory functions default to the CPU (torch >= 2.0; before that the
    default device is always the CPU)."""
    if hasattr(torch.device, "__enter__"):
        return torch.device("cpu")
    return contextlib.nullcontext()


# ---------------------------------------------------------------------------------------------
# loading


def load_checkpoint(torch, M, model, model_dir, threads=8):
    """Copy every checkpoint tensor into the model's parameter of the same name, converting the
    few the reference keeps in another form. Returns (bytes read, seconds)."""
    t0 = time.perf_counter()
    where = checkpoint_tensors(model_dir)
    params = dict(model.named_parameters())
    fp4 = getattr(torch, "float4_e2m1fn_x2", None)
    jobs, loaded, skipped = [], set(), []
    for name, st in where.items():
        dtype, shape, _, _ = st.tensors[name]
        p = params.get(name)
        if p is None:
            if name.endswith(".gate.bias_vl") or name.endswith(".wo_a.scale"):
                skipped.append(name)  # vision routing bias (text only) / folded into wo_a below
                continue
            raise BadInput(f"{st.path}: tensor {name} has no counterpart in the reference model")
        tdt = getattr(torch, ST_DTYPES[dtype][0], None)
        if tdt is None:
            raise BadInput(f"{st.path}: tensor {name}: this torch has no {ST_DTYPES[dtype][0]}")
        if p.dtype == tdt or (dtype == "I8" and p.dtype == fp4):
            want = list(p.shape)
            if want != shape:
                raise BadInput(f"{st.path}: tensor {name} has shape {shape}, the reference wants {want}")
            jobs.append((name, st, "raw", p))
        elif dtype in ("BF16", "F16") and p.dtype == torch.float32:
            if list(p.shape) != shape:
                raise BadInput(f"{st.path}: tensor {name} has shape {shape}, the reference wants {list(p.shape)}")
            jobs.append((name, st, "widen", p))
        elif dtype == "F8_E4M3" and p.dtype == torch.bfloat16 and name.endswith(".wo_a.weight"):
            sname = name[: -len("weight")] + "scale"
            if sname not in where:
                raise BadInput(f"{st.path}: tensor {name} is fp8 but {sname} is missing")
            if list(p.shape) != shape:
                raise BadInput(f"{st.path}: tensor {name} has shape {shape}, the reference wants {list(p.shape)}")
            jobs.append((name, st, "dequant", p))
        else:
            raise BadInput(f"{st.path}: tensor {name} is {dtype}, the reference holds it as {p.dtype}")
        loaded.add(name)
    missing = sorted(set(params) - loaded)
    if missing:
        more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
        raise BadInput(f"{model_dir}: the checkpoint lacks {', '.join(missing[:5])}{more}")

    nbytes = [0]

    def run(job):
        name, st, how, p = job
        with cpu_device(torch):
            if how == "raw":
                src = st.raw(torch, name)
                p.data.view(torch.uint8).view(-1).copy_(src)
            elif how == "widen":
                src = st.get(torch, name)
                p.data.copy_(src.to(p.device).float())
            else:  # wo_a: weight * scale per 32x32 block, as convert.py does (exact in bf16)
                w = st.get(torch, name).to(p.device).float()
                sname = name[: -len("weight")] + "scale"
                s = where[sname].get(torch, sname).to(p.device).float()
                o, i = w.shape
                bo, bi = -(-o // s.shape[0]), -(-i // s.shape[1])
                s = s.repeat_interleave(bo, 0)[:o].repeat_interleave(bi, 1)[:, :i]
                p.data.copy_((w * s).to(torch.bfloat16))
        nbytes[0] += st.tensors[name][3] - st.tensors[name][2]

    if threads > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(threads) as ex:
            for _ in ex.map(run, jobs):
                pass
    else:
        for j in jobs:
            run(j)
    if skipped:
        log(f"checkpoint tensors not used by the text reference: {len(skipped)} (gate.bias_vl; wo_a scales folded)")
    return nbytes[0], time.perf_counter() - t0


# ---------------------------------------------------------------------------------------------
# GEMMs as cuBLAS bf16 on dequantised operands (--kernels cublas)


class CublasGemms:
    def __init__(self, torch, K):
        self.torch = torch
        self.F = torch.nn.functional
        self.table = {}
        self.fp4_values = K.FP4_TABLE

    def _pairs(self, device):
        t = self.table.get(device)
        if t is None:
            torch = self.torch
            v = torch.arange(256, device=device)
            f = self.fp4_values.to(device=device, dtype=torch.float32)
            t = torch.stack([f[v & 15], f[v >> 4]], dim=-1).to(torch.bfloat16)  # low nibble = even k
            self.table[device] = t
        return t

    def _act(self, a, a_s, block):
        torch = self.torch
        K = a.size(-1)
        m = a.numel() // K
        s = a_s.reshape(m, K // block, 1).float().to(torch.bfloat16)
        return (a.reshape(m, K // block, block).to(torch.bfloat16) * s).reshape(m, K)

    def fp8_gemm(self, a, a_s, b, b_s, scale_dtype=None, block_size=128):
        torch = self.torch
        K, N = a.size(-1), b.size(0)
        s = b_s.float().to(torch.bfloat16).repeat_interleave(block_size, 0)[:N].repeat_interleave(block_size, 1)
        w = b.to(torch.bfloat16) * s[:, :K]
        c = self.F.linear(self._act(a, a_s, block_size), w)
        return c.to(torch.get_default_dtype()).view(*a.size()[:-1], N)

    def fp4_gemm(self, a, a_s, b, b_s, scale_dtype=None, act_block_size=128):
        torch = self.torch
        K, N = a.size(-1), b.size(0)
        w = self._pairs(b.device)[b.view(torch.uint8).long()].reshape(N, K)
        w = w * b_s.float().to(torch.bfloat16).repeat_interleave(32, 1)
        c = self.F.linear(self._act(a, a_s, act_block_size), w)
        return c.to(torch.get_default_dtype()).view(*a.size()[:-1], N)


def set_kernels(torch, M, K, mode, cublas):
    if mode == "port":
        M.fp8_gemm, M.fp4_gemm = K.fp8_gemm, K.fp4_gemm
    else:
        M.fp8_gemm, M.fp4_gemm = cublas.fp8_gemm, cublas.fp4_gemm


# ---------------------------------------------------------------------------------------------
# timing


def log(msg):
    print(f"run_ref: {msg}", file=sys.stderr, flush=True)


def bench(torch, model, args, device, mode, vocab):
    cuda = device.startswith("cuda")

    def sync():
        if cuda:
            torch.cuda.synchronize()

    g = torch.Generator(device="cpu").manual_seed(args.seed)
    n_ids = max(args.prefill, args.context, args.warmup_prefill)
    ids = torch.randint(3, vocab, (1, n_ids), generator=g, device="cpu").to(device)

    def decode(start, steps, first):
        tok = first
        for i in range(steps):
            tok, _, _ = model(tok.view(1, 1), start + i)
        return tok

    t0 = time.perf_counter()
    if args.warmup_prefill > 0:
        out, _, _ = model(ids[:, : args.warmup_prefill], 0)
        decode(args.warmup_prefill, 2, out)
    sync()
    warm_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    out, _, _ = model(ids[:, : args.prefill], 0)
    sync()
    prefill_s = time.perf_counter() - t0
    if args.context != args.prefill:
        out, _, _ = model(ids[:, : args.context], 0)
    sync()
    t0 = time.perf_counter()
    decode(args.context, args.decode, out)
    sync()
    decode_s = time.perf_counter() - t0
    return {
        "kernels": mode,
        "prefill_tokens": args.prefill,
        "prefill_s": round(prefill_s, 4),
        "prefill_tok_s": round(args.prefill / prefill_s, 3),
        "decode_context": args.context,
        "decode_steps": args.decode,
        "decode_s": round(decode_s, 4),
        "decode_tok_s": round(args.decode / decode_s, 3) if args.decode else None,
        "warmup_s": round(warm_s, 2),
    }


# ---------------------------------------------------------------------------------------------
# --check: block-local comparison with a golden file


class Golden:
    def __init__(self, torch, path, device):
        self.torch, self.st, self.device = torch, SafeTensors(path), device

    def has(self, name):
        return name in self.st.tensors

    def get(self, name):
        if name not in self.st.tensors:
            raise BadInput(f"{self.st.path}: no tensor {name}")
        with cpu_device(self.torch):
            return self.st.get(self.torch, name).to(self.device)


def rel(torch, a, b):
    a, b = a.float(), b.float()
    d = torch.linalg.vector_norm(a - b).item()
    n = torch.linalg.vector_norm(b).item()
    return (d / n if n else d), (a - b).abs().max().item() if a.numel() else 0.0


class Teacher:
    """Hooks that feed each Block (and Engram module) the golden input and record how its output
    compares with the golden output."""

    def __init__(self, torch, M, model, gold):
        self.torch, self.gold, self.phase = torch, gold, "prefill"
        self.worst = {}  # metric -> (value, where)
        self.rows = {"gate": [0, 0], "index": [0, 0]}  # identical, total
        self.handles = []
        for layer in model.layers:
            self.handles.append(layer.register_forward_pre_hook(self._block_in))
            self.handles.append(layer.register_forward_hook(self._block_out))
            self.handles.append(layer.ffn.gate.register_forward_hook(self._gate_out))
            if layer.engram is not None and layer.layer_id > 0:
                self.handles.append(layer.engram.register_forward_pre_hook(self._engram_in))
                self.handles.append(layer.engram.register_forward_hook(self._engram_out))
            if layer.attn.indexer is not None:
                self.handles.append(layer.attn.indexer.register_forward_hook(self._index_out))

    def remove(self):
        for h in self.handles:
            h.remove()

    def g(self, name):
        return self.gold.get(f"{self.phase}.{name}")

    def note(self, metric, value, where):
        if metric not in self.worst or value > self.worst[metric][0]:
            self.worst[metric] = (value, where)

    def compare(self, what, got, name):
        r, m = rel(self.torch, got, self.g(name))
        self.note(f"{what}_rel", r, f"{self.phase}.{name}")
        self.note(f"{what}_maxabs", m, f"{self.phase}.{name}")

    def _block_in(self, module, args):
        x, start_pos, pre_mix, image_mask = args[:4]
        L = module.layer_id
        if module.engram is not None:
            x = self.g(f"L{L}.engram_out").to(x.dtype).view_as(x)
        elif L > 0:
            x = self.g(f"L{L - 1}.stream_out").to(x.dtype).view_as(x)
        pre_mix = self.g(f"L{L}.pre_in").to(pre_mix.dtype).view_as(pre_mix)
        return (x, start_pos, pre_mix, image_mask) + tuple(args[4:])

    def _block_out(self, module, args, output):
        self.compare("stream_out", output[0], f"L{module.layer_id}.stream_out")
        self.compare("pre_out", output[1], f"L{module.layer_id}.pre_out")

    def _engram_in(self, module, args):
        x = self.g(f"L{module.layer_id - 1}.stream_out").to(args[0].dtype).view_as(args[0])
        return (x,) + tuple(args[1:])

    def _engram_out(self, module, args, output):
        self.compare("engram_out", output, f"L{module.layer_id}.engram_out")

    def _rows(self, kind, got, want):
        got = got.reshape(-1, got.size(-1)).sort(dim=-1).values
        want = want.reshape(-1, want.size(-1)).to(got.dtype).sort(dim=-1).values
        if got.shape != want.shape:
            self.rows[kind][1] += want.size(0)
            return
        self.rows[kind][0] += int((got == want).all(dim=-1).sum())
        self.rows[kind][1] += want.size(0)

    def _gate_out(self, module, args, output):
        L = self._layer_of_gate(module)
        self._rows("gate", output[1], self.g(f"L{L}.gate_indices"))

    def _index_out(self, module, args, output):
        L = self._layer_of_index(module)
        name = f"{self.phase}.L{L}.index_topk"
        if self.gold.has(name):
            self._rows("index", output, self.gold.get(name))

    def bind(self, model):
        self._gates = {id(layer.ffn.gate): layer.layer_id for layer in model.layers}
        self._indexers = {id(layer.attn.indexer): layer.layer_id for layer in model.layers if layer.attn.indexer}

    def _layer_of_gate(self, module):
        return self._gates[id(module)]

    def _layer_of_index(self, module):
        return self._indexers[id(module)]


def check(torch, M, model, gold, device, mode):
    ids = gold.get("inputs.input_ids")
    dec = gold.get("inputs.decode_input_ids")
    B, S = ids.shape
    n = dec.size(1)
    t = Teacher(torch, M, model, gold)
    t.bind(model)
    try:
        t.phase = "prefill"
        _, logits, _ = model(ids, 0)
        t.compare("logits", logits, "logits_last")
        for i in range(n):
            t.phase = f"decode{i:02d}"
            _, logits, _ = model(dec[:, i : i + 1], S + i)
            t.compare("logits", logits, "logits")
    finally:
        t.remove()
    # free-running, for information only (the reference is chaotic: see the golden README)
    out, logits, _ = model(ids, 0)
    free_rel, _ = rel(torch, logits, gold.get("prefill.logits_last"))
    gen = [out]
    for i in range(n):
        out, _, _ = model(out.view(B, 1), S + i)
        gen.append(out)
    gen = torch.stack(gen, dim=1)
    want_gen = gold.get("inputs.generated_ids")
    same_ids = int((gen == want_gen).sum())

    limits = {"stream_out_rel": 1e-2, "stream_out_maxabs": 0.1, "engram_out_rel": 1e-2, "logits_rel": 1e-3}
    res = {"check": "pass", "kernels": mode, "device": device_name(torch, device)}
    for k, (v, where) in sorted(t.worst.items()):
        res[k] = float(f"{v:.3g}")
        res[k + "_at"] = where
        if k in limits and v > limits[k]:
            res["check"] = "fail"
    for k, (same, total) in t.rows.items():
        res[f"{k}_rows_identical"] = f"{same}/{total}"
        if total and same < 0.98 * total:
            res["check"] = "fail"
    res["free_prefill_logits_rel"] = float(f"{free_rel:.3g}")
    res["free_greedy_ids_equal"] = f"{same_ids}/{want_gen.numel()}"
    return res


# ---------------------------------------------------------------------------------------------


def device_name(torch, device):
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return f"cpu ({torch.get_num_threads()} threads)"


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="checkpoint directory (config.json, shards, token map)")
    p.add_argument("--ref", default=os.path.join(REPO, ".devbin", "ref"), help="folder holding deepseek_v41/")
    p.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    p.add_argument("--prefill", type=int, default=1024, help="prompt tokens of the timed prefill")
    p.add_argument("--context", type=int, default=None, help="prompt before the timed decode (default: --prefill)")
    p.add_argument("--decode", type=int, default=16, help="timed greedy decode steps")
    p.add_argument("--warmup-prefill", type=int, default=32, help="tokens of the warm-up prefill (0: none)")
    p.add_argument("--kernels", default="port", choices=["port", "cublas", "both"])
    p.add_argument("--check", metavar="GOLDEN", help="golden.safetensors to compare with (block-local)")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    p.add_argument("--load-threads", type=int, default=min(4, os.cpu_count() or 1), help="threads reading the checkpoint")
    p.add_argument("--seed", type=int, default=1, help="seed of the random prompt")
    a = p.parse_args(argv)
    if a.context is None:
        a.context = a.prefill
    for k in ("prefill", "context"):
        if getattr(a, k) < 1:
            raise BadInput(f"--{k} must be at least 1")
    if a.decode < 0 or a.warmup_prefill < 0:
        raise BadInput("--decode and --warmup-prefill must not be negative")
    return a


def main(argv):
    a = parse(argv)
    try:
        import torch
    except ImportError:
        raise BadInput("no torch in this Python") from None
    missing = [d for d in ("float8_e4m3fn", "float8_e8m0fnu", "float4_e2m1fn_x2") if not hasattr(torch, d)]
    if missing and not os.environ.get("DS4_REF_SHIM"):
        raise BadInput(f"torch {torch.__version__} lacks {', '.join(missing)}: the reference needs torch >= 2.8")
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        raise BadInput(f"--device {a.device}: torch {torch.__version__} sees no CUDA device")
    if a.threads:
        torch.set_num_threads(a.threads)
    if not os.path.isdir(a.model):
        raise BadInput(f"--model {a.model}: not a directory")

    torch.set_default_dtype(torch.bfloat16)
    if hasattr(torch, "set_default_device"):
        torch.set_default_device(a.device)  # before the import: kernel_cpu's tables land there
    if a.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    M, K, E = import_reference(os.path.abspath(a.ref))

    gold = None
    if a.check:
        gold = Golden(torch, a.check, a.device)
        batch, seq = 2, 64  # the golden runs' runtime ModelArgs (their README)
        ids = gold.get("inputs.input_ids")
        batch = ids.size(0)
    else:
        batch = 1
        need = max(a.prefill, a.context + a.decode, a.warmup_prefill + 2)
        seq = -(-(need + 1) // 256) * 256
    args = model_args(M, a.model, batch, seq)
    patch_reference(torch, M, E, a.model, args)

    t0 = time.perf_counter()
    torch.manual_seed(0)
    model = M.Transformer(args)
    model.eval()
    build_s = time.perf_counter() - t0
    nbytes, load_s = load_checkpoint(torch, M, model, a.model, a.load_threads)
    if a.device.startswith("cuda"):
        torch.cuda.synchronize()
    log(f"model built in {build_s:.1f}s, {nbytes / 1e9:.2f} GB loaded in {load_s:.1f}s ({nbytes / 1e9 / load_s:.2f} GB/s)")

    cublas = CublasGemms(torch, K)
    modes = ["cublas", "port"] if a.kernels == "both" else [a.kernels]
    failed = False
    for mode in modes:
        set_kernels(torch, M, K, mode, cublas)
        if gold is not None:
            res = check(torch, M, model, gold, a.device, mode)
            failed |= res["check"] != "pass"
        else:
            res = bench(torch, model, a, a.device, mode, args.vocab_size)
            res["device"] = device_name(torch, a.device)
            res["load_s"] = round(load_s, 2)
            res["checkpoint_gb"] = round(nbytes / 1e9, 3)
            if a.device.startswith("cuda"):
                res["max_allocated_gb"] = round(torch.cuda.max_memory_allocated() / 1e9, 2)
        res["torch"] = torch.__version__
        res["model"] = a.model
        print(json.dumps(res), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BadInput as e:
        print(f"run_ref: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        sys.exit(1)
