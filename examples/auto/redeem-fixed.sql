-- One atomic compare-and-set: the row count says who won.
BEGIN;
UPDATE coupons_{{.RunID}} SET used = 1 WHERE code = '{{.Token}}' AND used = 0;
\if :ROW_COUNT = 0
  \decline already redeemed
\endif
INSERT INTO redemptions_{{.RunID}} (code, attempt) VALUES ('{{.Token}}', {{.Attempt}});
COMMIT;
