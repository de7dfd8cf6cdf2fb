-- After each burst: how many times was this coupon redeemed?
SELECT count(*) FROM redemptions_{{.RunID}} WHERE code = '{{.Token}}';
