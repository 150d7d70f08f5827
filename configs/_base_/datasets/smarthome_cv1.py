# Toyota Smarthome, cross-view 1: 19 classes, train camera 1.
# Lists: python tools/data/smarthome/build_annotations.py --video-dir data/smarthome/videos \
#            --out-dir data/smarthome/cv1 --protocol CV1
_base_ = ['./video_8x32.py']
data_root = 'data/smarthome/videos'
train_dataloader = dict(
    dataset=dict(ann_file='data/smarthome/cv1/train.txt', data_prefix=dict(video=data_root)))
val_dataloader = dict(
    dataset=dict(ann_file='data/smarthome/cv1/val.txt', data_prefix=dict(video=data_root)))
test_dataloader = dict(
    dataset=dict(ann_file='data/smarthome/cv1/test.txt', data_prefix=dict(video=data_root)))
