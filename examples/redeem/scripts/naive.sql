-- The naive redeem: read the flag, and if the coupon is unused, use it.
-- Every attempt that reads before the first one commits sees used = 0.
BEGIN;
SELECT used FROM coupons_{{.RunID}} WHERE code = '{{.Token}}' \gset
\if :used = 0
  UPDATE coupons_{{.RunID}} SET used = 1 WHERE code = '{{.Token}}';
  INSERT INTO redemptions_{{.RunID}} (code, attempt) VALUES ('{{.Token}}', {{.Attempt}});
\else
  \decline already redeemed
\endif
COMMIT;
