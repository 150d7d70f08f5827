# Toyota Smarthome, cross-view 2: 19 classes, train cameras 1, 3, 4, 6, 7.
# Lists: python tools/data/smarthome/build_annotations.py --video-dir data/smarthome/videos \
#            --out-dir data/smarthome/cv2 --protocol CV2
_base_ = ['./video_8x32.py']
data_root = 'data/smarthome/videos'
train_dataloader = dict(
    dataset=dict(ann_file='data/smarthome/cv2/train.txt', data_prefix=dict(video=data_root)))
val_dataloader = dict(
    dataset=dict(ann_file='data/smarthome/cv2/val.txt', data_prefix=dict(video=data_root)))
test_dataloader = dict(
    dataset=dict(ann_file='data/smarthome/cv2/test.txt', data_prefix=dict(video=data_root)))
