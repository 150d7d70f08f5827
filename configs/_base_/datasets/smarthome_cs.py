# Toyota Smarthome, cross-subject: 31 classes; report mCA on test.
# Videos read as distributed (640x480 mp4), as the paper's authors did: no preparation step.
# Lists: python tools/data/smarthome/build_annotations.py --video-dir data/smarthome/videos \
#            --out-dir data/smarthome/cs --protocol CS
_base_ = ['./video_8x32.py']
num_classes = 31  # labels are checked against it when the datasets are built
label_map = 'smarthome_cs_classes'  # class names (tools/infer.py): a shipped map or a file
data_root = 'data/smarthome/videos'
train_dataloader = dict(
    dataset=dict(
        ann_file='data/smarthome/cs/train.txt', data_prefix=dict(video=data_root), num_classes=num_classes
    )
)
val_dataloader = dict(
    dataset=dict(
        ann_file='data/smarthome/cs/val.txt', data_prefix=dict(video=data_root), num_classes=num_classes
    )
)
test_dataloader = dict(
    dataset=dict(
        ann_file='data/smarthome/cs/test.txt', data_prefix=dict(video=data_root), num_classes=num_classes
    )
)
