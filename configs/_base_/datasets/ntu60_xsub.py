# NTU RGB+D 60, cross-subject (the paper's "CS"): 60 classes, top-1.
# Lists: python tools/data/ntu60/build_annotations.py --video-dir data/ntu60/videos \
#            --out-dir data/ntu60/xsub --protocol xsub
_base_ = ['./video_8x32.py']
num_classes = 60  # labels are checked against it when the datasets are built
label_map = 'label_map_ntu60'  # class names (tools/infer.py): a shipped map or a file
data_root = 'data/ntu60/videos'
train_dataloader = dict(
    dataset=dict(
        ann_file='data/ntu60/xsub/train.txt', data_prefix=dict(video=data_root), num_classes=num_classes
    )
)
val_dataloader = dict(
    dataset=dict(
        ann_file='data/ntu60/xsub/test.txt', data_prefix=dict(video=data_root), num_classes=num_classes
    )
)
test_dataloader = dict(
    dataset=dict(
        ann_file='data/ntu60/xsub/test.txt', data_prefix=dict(video=data_root), num_classes=num_classes
    )
)
