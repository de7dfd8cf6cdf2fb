-- Read the flag, and if the coupon is unused, use it and record the
-- redemption: every attempt that reads before the first commit redeems.
BEGIN;
SELECT used FROM coupons_{{.RunID}} WHERE code = '{{.Token}}' \gset
\if :used = 0
  UPDATE coupons_{{.RunID}} SET used = 1 WHERE code = '{{.Token}}';
  INSERT INTO redemptions_{{.RunID}} (code, attempt) VALUES ('{{.Token}}', {{.Attempt}});
\else
  \decline already redeemed
\endif
COMMIT;
