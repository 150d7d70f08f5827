# NTU RGB+D 60, cross-view (the paper's "CV"): 60 classes, top-1.
# Input: the 224x224 person-centric crops the paper's authors trained on (docs/datasets/), made
# from the skeleton files, and lists built on them:
#   python tools/data/ntu60/person_crops.py --video-dir data/ntu60/videos \
#       --skeleton-dir data/ntu60/skeletons --out-dir data/ntu60/person_crops
#   python tools/data/ntu60/build_annotations.py --video-dir data/ntu60/person_crops \
#       --out-dir data/ntu60/person_crops/xview --protocol xview
# Full 1920x1080 frames instead (lists: build_annotations.py --video-dir data/ntu60/videos
# --out-dir data/ntu60/xview --protocol xview): add to tools/train.py / tools/test.py
#   --cfg-options train_dataloader.dataset.data_prefix.video=data/ntu60/videos \
#       train_dataloader.dataset.ann_file=data/ntu60/xview/train.txt \
#       val_dataloader.dataset.data_prefix.video=data/ntu60/videos \
#       val_dataloader.dataset.ann_file=data/ntu60/xview/test.txt \
#       test_dataloader.dataset.data_prefix.video=data/ntu60/videos \
#       test_dataloader.dataset.ann_file=data/ntu60/xview/test.txt
# The pipelines need no other change: large frames are decoded at the size they are used at.
_base_ = ['./video_8x32.py']
num_classes = 60  # labels are checked against it when the datasets are built
label_map = 'label_map_ntu60'  # class names (tools/infer.py): a shipped map or a file
data_root = 'data/ntu60/person_crops'
train_dataloader = dict(
    dataset=dict(
        ann_file=f'{data_root}/xview/train.txt', data_prefix=dict(video=data_root), num_classes=num_classes
    )
)
val_dataloader = dict(
    dataset=dict(
        ann_file=f'{data_root}/xview/test.txt', data_prefix=dict(video=data_root), num_classes=num_classes
    )
)
test_dataloader = dict(
    dataset=dict(
        ann_file=f'{data_root}/xview/test.txt', data_prefix=dict(video=data_root), num_classes=num_classes
    )
)
