# Toyota Smarthome, cross-view 1: 19 classes, train camera 1.
# Videos read as distributed (640x480 mp4), as the paper's authors did: no preparation step.
# Lists: python tools/data/smarthome/build_annotations.py --video-dir data/smarthome/videos \
#            --out-dir data/smarthome/cv1 --protocol CV1
_base_ = ['./video_8x32.py']
num_classes = 19  # labels are checked against it when the datasets are built
label_map = 'smarthome_cv_classes'  # class names (tools/infer.py): a shipped map or a file
data_root = 'data/smarthome/videos'
train_dataloader = dict(
    dataset=dict(
        ann_file='data/smarthome/cv1/train.txt', data_prefix=dict(video=data_root), num_classes=num_classes
    )
)
val_dataloader = dict(
    dataset=dict(
        ann_file='data/smarthome/cv1/val.txt', data_prefix=dict(video=data_root), num_classes=num_classes
    )
)
test_dataloader = dict(
    dataset=dict(
        ann_file='data/smarthome/cv1/test.txt', data_prefix=dict(video=data_root), num_classes=num_classes
    )
)
