# Toyota Smarthome, cross-subject: 31 classes; report mCA on test.
# Lists: python tools/data/smarthome/build_annotations.py --video-dir data/smarthome/videos \
#            --out-dir data/smarthome/cs --protocol CS
_base_ = ['./video_8x32.py']
data_root = 'data/smarthome/videos'
train_dataloader = dict(
    dataset=dict(ann_file='data/smarthome/cs/train.txt', data_prefix=dict(video=data_root)))
val_dataloader = dict(
    dataset=dict(ann_file='data/smarthome/cs/val.txt', data_prefix=dict(video=data_root)))
test_dataloader = dict(
    dataset=dict(ann_file='data/smarthome/cs/test.txt', data_prefix=dict(video=data_root)))
