-- The conditional redeem: one atomic compare-and-set. The row count says
-- who won; the others change nothing and decline.
BEGIN;
UPDATE coupons_{{.RunID}} SET used = 1 WHERE code = '{{.Token}}' AND used = 0;
\if :ROW_COUNT = 0
  \decline already redeemed
\endif
INSERT INTO redemptions_{{.RunID}} (code, attempt) VALUES ('{{.Token}}', {{.Attempt}});
COMMIT;
