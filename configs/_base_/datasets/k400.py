# Kinetics-400: MMAction2's lists as they are (labels index shared/data/label_map_k400.txt);
# check them with tools/data/kinetics/check_annotations.py. Test: 1 clip x 3 crops (video_8x32.py).
# Videos resized to short side 256, as the paper's authors prepared them (docs/datasets/):
#   python tools/data/resize_videos.py data/kinetics400/raw/videos_train \
#       data/kinetics400/videos_train --short-side 256
#   python tools/data/resize_videos.py data/kinetics400/raw/videos_val \
#       data/kinetics400/videos_val --short-side 256
_base_ = ['./video_8x32.py']
num_classes = 400  # labels are checked against it when the datasets are built
label_map = 'label_map_k400'  # class names (tools/infer.py): a shipped map or a file
train_dataloader = dict(
    dataset=dict(
        num_classes=num_classes,
        ann_file='data/kinetics400/kinetics400_train_list_videos.txt',
        data_prefix=dict(video='data/kinetics400/videos_train'),
    )
)
val_dataloader = dict(
    dataset=dict(
        num_classes=num_classes,
        ann_file='data/kinetics400/kinetics400_val_list_videos.txt',
        data_prefix=dict(video='data/kinetics400/videos_val'),
    )
)
test_dataloader = dict(
    dataset=dict(
        num_classes=num_classes,
        ann_file='data/kinetics400/kinetics400_val_list_videos.txt',
        data_prefix=dict(video='data/kinetics400/videos_val'),
    )
)
