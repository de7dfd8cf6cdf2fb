DROP TABLE IF EXISTS redemptions_{{.RunID}};
DROP TABLE IF EXISTS coupons_{{.RunID}};
