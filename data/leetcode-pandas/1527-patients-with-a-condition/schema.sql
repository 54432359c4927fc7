CREATE TABLE Patients (
  patient_id INT PRIMARY KEY,
  patient_name VARCHAR(30),
  conditions VARCHAR(100)
);
