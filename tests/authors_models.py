"""The authors' DnA modules (github rjccv/DnA), re-written from their structure for tests.

Each class has the parameter names, shapes and forward of the released code it names, so a
state dict saved from it is shaped as *their* code writes it (not as dna_mm's does):

* :class:`AuthorsQQKVV`: ``vit/dna_models.py`` (``combine='add'``) and ``vit/dna.py``
  ``DenoisingAttention`` (``combine='sub'``): one ``qqkvv`` = ``[Q+, Q-, K, V+, V-]``.
* :class:`AuthorsQQKV`: ``vit/dna.py`` ``DenoisingAttentionSharedValues``: ``qqkv`` =
  ``[Q+, Q-, K, V]``, ``pos - α neg`` with shared ``V``.
* :class:`AuthorsQkvNeg`: ``timesformer/models/dna.py``: ``qkv``, ``q_neg``, ``v_neg``, add.
* :class:`AuthorsDnAViT`: ``vit/dna_models.py``'s ``DnA_Vision_Transformer`` (``pos_embed``
  ``[1, N, C]`` without a CLS row; the CLS token gets no position).
* :class:`AuthorsDnATimeSformer`: ``timesformer/models/dna.py``'s ``DnATransformer``
  (divided space-time blocks, ``temporal_norm1`` / ``temporal_attn`` / ``temporal_fc``), and
  :class:`AuthorsDnABase`, their ``dna_base_patch16_224`` (holds it as ``self.model``).
* :func:`save_pyslowfast_checkpoint`: their TimeSformer fork's ``save_checkpoint`` (PySlowFast):
  ``{'epoch', 'model_state', 'optimizer_state', 'cfg'}``.
* :func:`save_vit_main_checkpoint`: their ImageNet ``vit/main.py``'s per-epoch save: ``{'model',
  'optimizer', 'lr_scheduler', 'epoch', 'model_ema', 'scaler', 'args'}``, with a real
  ``argparse.Namespace`` of their flags and timm's optimizer / scheduler / scaler / EMA states.
* :class:`AuthorsViSCoPCrossDnA`: VisCoP's ``InteractionModule_CrossDenoisingAttention_FA2``
  (``viscop/viscop/model/viscop_vision_encoder/modeling_viscop_vision_encoder.py``): probes
  attend to packed patch tokens, ``q_pos_proj`` / ``q_neg_proj`` / ``k_proj`` / ``v_pos_proj`` /
  ``v_neg_proj`` / ``out_proj``, ``pos - neg_scalers · neg``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn


def _heads(t: torch.Tensor, h: int) -> torch.Tensor:
    b, n, c = t.shape
    return t.reshape(b, n, h, c // h).transpose(1, 2)


class _AuthorsAttention(nn.Module):
    def __init__(self, dim: int, num_heads: int, combine: str) -> None:
        super().__init__()
        self.num_heads, self.combine = num_heads, combine
        self.scale = (dim // num_heads) ** -0.5
        self.neg_scalers = nn.Parameter(torch.rand(num_heads) + 0.25)
        self.proj = nn.Linear(dim, dim)

    def mix(self, q_pos, q_neg, k, v_pos, v_neg) -> torch.Tensor:
        pos = F.softmax(q_pos * self.scale @ k.transpose(-2, -1), dim=-1) @ v_pos
        neg = (
            self.neg_scalers.view(1, -1, 1, 1)
            * F.softmin(q_neg * self.scale @ k.transpose(-2, -1), dim=-1)
            @ v_neg
        )
        out = pos + neg if self.combine == 'add' else pos - neg
        b, h, n, d = out.shape
        return self.proj(out.transpose(1, 2).reshape(b, n, h * d))


class AuthorsQQKVV(_AuthorsAttention):
    def __init__(self, dim: int, num_heads: int, combine: str = 'add') -> None:
        super().__init__(dim, num_heads, combine)
        self.qqkvv = nn.Linear(dim, 5 * dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        t = self.qqkvv(x).reshape(b, n, 5, self.num_heads, c // self.num_heads).permute(2, 0, 3, 1, 4)
        return self.mix(*t.unbind(0))


class AuthorsQQKV(_AuthorsAttention):
    def __init__(self, dim: int, num_heads: int, combine: str = 'sub') -> None:
        super().__init__(dim, num_heads, combine)
        self.qqkv = nn.Linear(dim, 4 * dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        q_pos, q_neg, k, v = (
            self.qqkv(x)
            .reshape(b, n, 4, self.num_heads, c // self.num_heads)
            .permute(2, 0, 3, 1, 4)
            .unbind(0)
        )
        return self.mix(q_pos, q_neg, k, v, v)


class AuthorsQkvNeg(_AuthorsAttention):
    def __init__(self, dim: int, num_heads: int, combine: str = 'add') -> None:
        super().__init__(dim, num_heads, combine)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.q_neg = nn.Linear(dim, dim)
        self.v_neg = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        q, k, v = (
            self.qkv(x).reshape(b, n, 3, self.num_heads, c // self.num_heads).permute(2, 0, 3, 1, 4).unbind(0)
        )
        return self.mix(q, _heads(self.q_neg(x), self.num_heads), k, v, _heads(self.v_neg(x), self.num_heads))


class _Mlp(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class _PatchEmbed(nn.Module):
    def __init__(self, dim: int, patch: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, dim, patch, patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)  # [B, P, C]


def _ln(dim: int) -> nn.LayerNorm:
    return nn.LayerNorm(dim, eps=1e-6)


class _ViTBlock(nn.Module):
    def __init__(self, dim: int, heads: int, attn_cls, combine: str) -> None:
        super().__init__()
        self.norm1, self.norm2 = _ln(dim), _ln(dim)
        self.attn = attn_cls(dim, heads, combine)
        self.mlp = _Mlp(dim)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class AuthorsDnAViT(nn.Module):
    """``DnA_Vision_Transformer``: ``x = patch_embed(x) + pos_embed`` (no CLS position), then
    the CLS token is prepended; blocks; ``norm``; ``head(x[:, 0])``."""

    def __init__(
        self,
        img_size: int = 32,
        patch: int = 8,
        dim: int = 32,
        depth: int = 2,
        heads: int = 4,
        num_classes: int = 5,
        attn_cls=AuthorsQQKVV,
        combine: str = 'add',
    ) -> None:
        super().__init__()
        self.patch_embed = _PatchEmbed(dim, patch)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, (img_size // patch) ** 2, dim) * 0.02)
        self.blocks = nn.ModuleList(_ViTBlock(dim, heads, attn_cls, combine) for _ in range(depth))
        self.norm = _ln(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.patch_embed(x) + self.pos_embed
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])


class _DividedBlock(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.norm1, self.norm2, self.temporal_norm1 = _ln(dim), _ln(dim), _ln(dim)
        self.attn = AuthorsQkvNeg(dim, heads)
        self.temporal_attn = AuthorsQkvNeg(dim, heads)
        self.temporal_fc = nn.Linear(dim, dim)
        self.mlp = _Mlp(dim)

    def forward(self, x, b: int, t: int, w: int):
        h = (x.size(1) - 1) // t // w
        xt = rearrange(x[:, 1:], 'b (h w t) m -> (b h w) t m', b=b, h=h, w=w, t=t)
        res_t = self.temporal_attn(self.temporal_norm1(xt))
        res_t = self.temporal_fc(rearrange(res_t, '(b h w) t m -> b (h w t) m', b=b, h=h, w=w, t=t))
        xt = x[:, 1:] + res_t
        cls = x[:, :1]
        cls_t = rearrange(cls.repeat(1, t, 1), 'b t m -> (b t) m').unsqueeze(1)
        xs = rearrange(xt, 'b (h w t) m -> (b t) (h w) m', b=b, h=h, w=w, t=t)
        res_s = self.attn(self.norm1(torch.cat((cls_t, xs), 1)))
        cls_res = rearrange(res_s[:, 0], '(b t) m -> b t m', b=b, t=t).mean(1, keepdim=True)
        res_s = rearrange(res_s[:, 1:], '(b t) (h w) m -> b (h w t) m', b=b, h=h, w=w, t=t)
        x = torch.cat((cls, xt), 1) + torch.cat((cls_res, res_s), 1)
        return x + self.mlp(self.norm2(x))


class AuthorsDnATimeSformer(nn.Module):
    """``DnATransformer`` (divided space-time); ``forward`` returns the normalised CLS token
    (``forward_features``). Their checkpoints hold it as ``model.*`` under ``model_state``."""

    def __init__(
        self,
        img_size: int = 32,
        patch: int = 8,
        dim: int = 32,
        depth: int = 2,
        heads: int = 4,
        num_frames: int = 4,
        num_classes: int = 7,
    ) -> None:
        super().__init__()
        self.patch_embed = _PatchEmbed(dim, patch)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, (img_size // patch) ** 2 + 1, dim) * 0.02)
        self.time_embed = nn.Parameter(torch.randn(1, num_frames, dim) * 0.02)
        self.blocks = nn.ModuleList(_DividedBlock(dim, heads) for _ in range(depth))
        self.norm = _ln(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):  # [B, 3, T, H, W]
        b, _, t, _, _ = x.shape
        x = self.patch_embed(rearrange(x, 'b c t h w -> (b t) c h w'))
        w = int(x.shape[1] ** 0.5)
        x = torch.cat((self.cls_token.expand(x.size(0), -1, -1), x), dim=1) + self.pos_embed
        cls = x[:b, 0].unsqueeze(1)
        x = rearrange(x[:, 1:], '(b t) n m -> (b n) t m', b=b, t=t) + self.time_embed
        x = torch.cat((cls, rearrange(x, '(b n) t m -> b (n t) m', b=b, t=t)), dim=1)
        for block in self.blocks:
            x = block(x, b, t, w)
        return self.norm(x)[:, 0]

    forward_features = forward


class AuthorsDnABase(nn.Module):
    """``dna_base_patch16_224``: ``self.model = DnATransformer(...)``; ``forward(x)`` =
    ``model.head(model.forward_features(x))`` (their ``DnATransformer.forward``), the logits of
    inputs normalised as their loader does: ``(x / 255 - 0.45) / 0.225``."""

    def __init__(self, **kwargs) -> None:
        super().__init__()
        self.model = AuthorsDnATimeSformer(**kwargs)

    def forward(self, x):  # [B, 3, T, H, W] -> [B, classes]
        return self.model.head(self.model.forward_features(x))


def save_pyslowfast_checkpoint(model: AuthorsDnABase, path: Path, epoch: int = 14) -> Path:
    """As their fork's ``save_checkpoint`` (PySlowFast): the model's own state dict (``model.*``
    keys; DDP's ``.module`` is taken off before), the SGD optimizer's state after a step (their
    ``construct_optimizer``: momentum 0.9, weight decay 1e-4 on all but norms / biases), and
    ``cfg.dump()``: the YAML text of their config."""
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
    optimizer = torch.optim.SGD(
        [dict(params=decay, weight_decay=1e-4), dict(params=no_decay, weight_decay=0.0)],
        lr=0.005,
        momentum=0.9,
        nesterov=True,
    )
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    cfg = (
        'DATA:\n  MEAN: [0.45, 0.45, 0.45]\n  NUM_FRAMES: 8\n  SAMPLING_RATE: 32\n'
        '  STD: [0.225, 0.225, 0.225]\n  TRAIN_CROP_SIZE: 224\nMODEL:\n  MODEL_NAME: '
        'dna_base_patch16_224\n  NUM_CLASSES: 60\nTIMESFORMER:\n  ATTENTION_TYPE: '
        'divided_space_time\n  DNA_ATTENTION_TYPE: dna\n'
    )
    checkpoint = {
        'epoch': epoch,
        'model_state': model.state_dict(),
        'optimizer_state': optimizer.state_dict(),
        'cfg': cfg,
    }
    with open(path, 'wb') as f:  # PathManager.open(path, 'wb')
        torch.save(checkpoint, f)
    return path


#: ``vit/main.py``'s command-line flags and defaults (``get_args_parser``): dest -> (type, default)
VIT_MAIN_FLAGS = {
    'batch_size': (int, 64),
    'epochs': (int, 300),
    'grad_accum_steps': (int, 1),
    'model': (str, 'dna_vit_base_patch16_224'),
    'input_size': (int, 224),
    'drop': (float, 0.0),
    'drop_path': (float, 0.1),
    'model_ema': (bool, True),
    'model_ema_decay': (float, 0.99996),
    'model_ema_force_cpu': (bool, False),
    'opt': (str, 'adamw'),
    'opt_eps': (float, 1e-8),
    'opt_betas': (float, None),
    'clip_grad': (float, None),
    'momentum': (float, 0.9),
    'weight_decay': (float, 0.05),
    'sched': (str, 'cosine'),
    'lr': (float, 5e-4),
    'lr_noise': (float, None),
    'lr_noise_pct': (float, 0.67),
    'lr_noise_std': (float, 1.0),
    'warmup_lr': (float, 1e-6),
    'min_lr': (float, 1e-5),
    'decay_epochs': (float, 30),
    'warmup_epochs': (int, 5),
    'cooldown_epochs': (int, 10),
    'patience_epochs': (int, 10),
    'decay_rate': (float, 0.1),
    'color_jitter': (float, 0.3),
    'aa': (str, 'rand-m9-mstd0.5-inc1'),
    'smoothing': (float, 0.1),
    'train_interpolation': (str, 'bicubic'),
    'repeated_aug': (bool, True),
    'train_mode': (bool, True),
    'reprob': (float, 0.25),
    'remode': (str, 'pixel'),
    'recount': (int, 1),
    'mixup': (float, 0.0),
    'cutmix': (float, 0.0),
    'cutmix_minmax': (float, None),
    'mixup_prob': (float, 1.0),
    'mixup_switch_prob': (float, 0.5),
    'mixup_mode': (str, 'batch'),
    'data_path': (str, './data'),
    'data_set': (str, 'IMNET'),
    'output_dir': (str, ''),
    'device': (str, 'cuda'),
    'seed': (int, 0),
    'resume': (str, ''),
    'start_epoch': (int, 0),
    'eval': (bool, False),
    'eval_crop_ratio': (float, 0.875),
    'dist_eval': (bool, False),
    'num_workers': (int, 10),
    'pin_mem': (bool, True),
    'world_size': (int, 1),
    'dist_url': (str, 'env://'),
    'run_name': (str, None),
    'wandb_entity': (str, None),
    'wandb_project': (str, None),
}


def vit_main_args(argv: list[str], nb_classes: int) -> argparse.Namespace:
    """The ``args`` their ``main.py`` saves: its flags parsed from ``argv``, then what ``main``
    adds (``distributed`` from ``init_distributed_mode``, ``nb_classes``, ``world``,
    ``effective_batchsize``, the linearly scaled ``lr``)."""
    parser = argparse.ArgumentParser('ViT w/ DnA training and evaluation script')
    for dest, (kind, default) in VIT_MAIN_FLAGS.items():
        flag = '--' + dest.replace('_', '-')
        if kind is bool:
            parser.add_argument(flag, action='store_true', dest=dest)
            parser.add_argument('--no-' + dest.replace('_', '-'), action='store_false', dest=dest)
            parser.set_defaults(**{dest: default})
        else:
            parser.add_argument(flag, type=kind, default=default, dest=dest)
    args = parser.parse_args(argv)
    args.distributed = False  # utils.init_distributed_mode without a launcher
    args.nb_classes = nb_classes
    args.world = 1
    args.effective_batchsize = int(args.batch_size * args.world * args.grad_accum_steps)
    args.lr = args.lr * args.effective_batchsize / 512.0
    return args


def save_vit_main_checkpoint(model: nn.Module, path: Path, args: argparse.Namespace, epoch: int = 3) -> Path:
    """As their ``main.py`` saves ``checkpoint.pth`` after an epoch (``utils.save_on_master`` =
    ``torch.save``), with timm's optimizer / scheduler / ``NativeScaler`` / ``ModelEma`` built
    from ``args`` as ``main`` builds them, after one training step (so every state is filled;
    the EMA then differs from the model)."""
    from timm.optim import create_optimizer
    from timm.scheduler import create_scheduler
    from timm.utils import ModelEma, NativeScaler, get_state_dict

    model_ema = ModelEma(model, decay=args.model_ema_decay, device='cpu', resume='')
    optimizer = create_optimizer(args, model, filter_bias_and_bn=False)
    lr_scheduler, _ = create_scheduler(args, optimizer)
    loss_scaler = NativeScaler()
    x = torch.randn(2, 3, args.input_size, args.input_size, dtype=next(model.parameters()).dtype)
    model(x).square().mean().backward()
    optimizer.step()
    optimizer.zero_grad()
    model_ema.decay = 0.5  # one visible EMA step
    model_ema.update(model)
    lr_scheduler.step(epoch)
    torch.save(
        {
            'model': model.state_dict(),
            'optimizer': optimizer.state_dict(),
            'lr_scheduler': lr_scheduler.state_dict(),
            'epoch': epoch,
            'model_ema': get_state_dict(model_ema),
            'scaler': loss_scaler.state_dict(),
            'args': args,
        },
        path,
    )
    return path


class _AuthorsViSCoPDenoisingAttention(nn.Module):
    """VisCoP's ``VisionDenoisingAttention.__init__`` (``config``: ``hidden_size``,
    ``num_attention_heads``, ``attention_dropout``): the parameters in their order. (Its own
    self-attention ``forward``, ``pos + neg`` without ``neg_scalers`` and with rotary positions,
    is not in their encoder's ``VISION_ATTENTION_CLASSES``, so no released model runs it.)"""

    def __init__(self, config, layer_idx=None) -> None:
        super().__init__()
        self.config = config
        self.embed_dim = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = self.embed_dim // self.num_heads
        self.scale = self.head_dim**-0.5
        self.dropout = config.attention_dropout
        self.k_proj = nn.Linear(self.embed_dim, self.embed_dim)
        self.v_pos_proj = nn.Linear(self.embed_dim, self.embed_dim)
        self.q_pos_proj = nn.Linear(self.embed_dim, self.embed_dim)
        self.v_neg_proj = nn.Linear(self.embed_dim, self.embed_dim)
        self.q_neg_proj = nn.Linear(self.embed_dim, self.embed_dim)
        self.out_proj = nn.Linear(self.embed_dim, self.embed_dim)
        self.neg_scalers = nn.Parameter(torch.ones(self.num_heads) * 0.5)


def _flash_attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k) -> torch.Tensor:
    """``flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k)`` with its defaults (scale
    ``d ** -0.5``, not causal), on CPU: packed ``q [Tq, H, d]``, ``k, v [Tk, H, d]``; sequence
    ``i`` (rows ``cu[i]:cu[i+1]``) attends only to its own keys → ``[Tq, H, d]``."""
    out = []
    for i in range(len(cu_seqlens_q) - 1):
        qi = q[cu_seqlens_q[i] : cu_seqlens_q[i + 1]].transpose(0, 1)  # [H, Mi, d]
        ki = k[cu_seqlens_k[i] : cu_seqlens_k[i + 1]].transpose(0, 1)  # [H, Ni, d]
        vi = v[cu_seqlens_k[i] : cu_seqlens_k[i + 1]].transpose(0, 1)
        attn = F.softmax(qi @ ki.transpose(-2, -1) * q.shape[-1] ** -0.5, dim=-1)
        out.append((attn @ vi).transpose(0, 1))  # [Mi, H, d]
    return torch.cat(out)


class AuthorsViSCoPCrossDnA(_AuthorsViSCoPDenoisingAttention):
    """``InteractionModule_CrossDenoisingAttention_FA2``: queries from the probes, ``K, V±``
    from the encoder's tokens (no rotary positions), both packed over the batch::

        out = out_proj(FA(Q+, K, V+) - neg_scalers · FA(-Q-, K, V-))

    (``FA(-Q-, K, V-) = softmin(s Q- K^T) V-``); their encoder holds it as
    ``encoder.interaction_modules.{i}``."""

    def __init__(self, config, layer_idx=None) -> None:
        super().__init__(config, layer_idx=layer_idx)
        self.layer_idx = layer_idx

    def forward(self, visual_probes, hidden_states, cu_seqlensq, cu_seqlenskv) -> torch.Tensor:
        q_len, _ = visual_probes.size()
        kv_len, _ = hidden_states.size()
        q_pos = self.q_pos_proj(visual_probes).view(q_len, self.num_heads, self.head_dim)
        q_neg = self.q_neg_proj(visual_probes).view(q_len, self.num_heads, self.head_dim)
        k = self.k_proj(hidden_states).view(kv_len, self.num_heads, self.head_dim)
        v_pos = self.v_pos_proj(hidden_states).view(kv_len, self.num_heads, self.head_dim)
        v_neg = self.v_neg_proj(hidden_states).view(kv_len, self.num_heads, self.head_dim)
        out_pos = _flash_attn_varlen(q_pos, k, v_pos, cu_seqlensq, cu_seqlenskv)
        out_neg = _flash_attn_varlen(-q_neg, k, v_neg, cu_seqlensq, cu_seqlenskv)
        out_neg = out_neg * self.neg_scalers.view(1, self.num_heads, 1)
        return self.out_proj((out_pos - out_neg).reshape(q_len, -1))
