# Toyota Smarthome, cross-view 2: 19 classes, train cameras 1, 3, 4, 6, 7.
# Videos read as distributed (640x480 mp4), as the paper's authors did: no preparation step.
# Lists: python tools/data/smarthome/build_annotations.py --video-dir data/smarthome/videos \
#            --out-dir data/smarthome/cv2 --protocol CV2
_base_ = ['./video_8x32.py']
num_classes = 19  # labels are checked against it when the datasets are built
label_map = 'smarthome_cv_classes'  # class names (tools/infer.py): a shipped map or a file
data_root = 'data/smarthome/videos'
train_dataloader = dict(
    dataset=dict(
        ann_file='data/smarthome/cv2/train.txt', data_prefix=dict(video=data_root), num_classes=num_classes
    )
)
val_dataloader = dict(
    dataset=dict(
        ann_file='data/smarthome/cv2/val.txt', data_prefix=dict(video=data_root), num_classes=num_classes
    )
)
test_dataloader = dict(
    dataset=dict(
        ann_file='data/smarthome/cv2/test.txt', data_prefix=dict(video=data_root), num_classes=num_classes
    )
)
