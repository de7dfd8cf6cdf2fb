-- Before each burst: a fresh coupon, named by the burst's token.
INSERT INTO coupons_{{.RunID}} (code) VALUES ('{{.Token}}');
